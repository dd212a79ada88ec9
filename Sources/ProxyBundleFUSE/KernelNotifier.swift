#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// Tells the kernel to drop what it cached about names and nodes. It holds the session once
/// the session exists; before that (and after it ends) notifications are skipped.
final class KernelNotifier: Sendable {
    private let session = Locked<OpaquePointer?>(nil)
    /// Whether this kernel accepts FUSE_NOTIFY_INC_EPOCH on this connection (nil: not tried).
    let acceptsEpoch: Locked<Bool?>

    /// `usesEpoch: false` never tries FUSE_NOTIFY_INC_EPOCH (to test the per-name fallback).
    init(usesEpoch: Bool = true) {
        acceptsEpoch = Locked(usesEpoch ? nil : false)
    }

    func attach(_ session: OpaquePointer?) {
        self.session.withLock { $0 = session }
    }

    /// Marks every name the kernel cached (positive or negative) as needing a new lookup, in
    /// one message. False when the kernel does not know the message (before Linux 6.16).
    func expireAllNames() -> Bool {
        guard let se = session.withLock({ $0 }) else { return false }
        if acceptsEpoch.withLock({ $0 }) == false { return false }
        let accepted = pb_notify_bare(se, 8 /* FUSE_NOTIFY_INC_EPOCH */) == 0
        acceptsEpoch.withLock { $0 = accepted }
        return accepted
    }

    /// Drops the kernel's entry for `name` in `parent` (not cached: nothing to do).
    func invalidateName(_ name: [UInt8], in parent: NodeID) {
        guard let se = session.withLock({ $0 }) else { return }
        _ = name.withCStringCopy { fuse_lowlevel_notify_inval_entry(se, parent, $0, name.count) }
    }

    /// Drops the kernel's attributes of `node` only (its pages stay).
    func invalidateAttributes(of node: NodeID) {
        guard let se = session.withLock({ $0 }) else { return }
        _ = fuse_lowlevel_notify_inval_inode(se, node, -1, 0)
    }

    /// Drops the kernel's attributes of `node` and every cached page (file data, symlink
    /// target, directory listing).
    func invalidateNode(_ node: NodeID) {
        guard let se = session.withLock({ $0 }) else { return }
        _ = fuse_lowlevel_notify_inval_inode(se, node, 0, 0)
    }
}
