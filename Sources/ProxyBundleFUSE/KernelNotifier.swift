#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// Tells the kernel to drop what it cached about names and nodes. It holds the session once
/// the session exists; before that (and after it ends) notifications are skipped.
///
/// No lock is held while the kernel is notified (a notification may wait for a lock of the
/// kernel's that a request in flight holds): each notification counts itself as using the
/// session, and `detach`, which the session calls once its loop has ended, waits until none
/// does. Notifications that must wait until a reply lets go of the kernel's locks go to one
/// worker thread (`invalidateNamesLater`), started at the first such work and ended by
/// `detach`, which waits for it. Its queue holds `queueLimit` names at most: past that,
/// the names queued give way to one invalidation of everything (`whenOverflowing`).
final class KernelNotifier: Sendable {
    /// The most names queued for the worker.
    static let queueLimit = 1024

    private enum Worker { case none, running, ended }

    private struct State {
        var session: OpaquePointer?
        /// Notifications using the session now.
        var users = 0
        /// Names for the worker, in order; none but `overflowed` past `queueLimit`.
        var queued: [(parent: NodeID, name: [UInt8])] = []
        var overflowed = false
        var worker = Worker.none
        /// What the worker runs for an overflowed queue.
        var overflowHandler: (@Sendable () -> Void)? = nil
    }

    private let state = Locked(State(), rank: .kernelNotifier)
    /// Signalled when the last user of the session is done, and when the worker ends.
    private let idle = Condition()
    /// Signalled when there is work for the worker, or the session goes.
    private let wake = Condition()
    /// Whether this kernel accepts FUSE_NOTIFY_INC_EPOCH on this connection (nil: not tried).
    let acceptsEpoch: Locked<Bool?>

    /// `usesEpoch: false` never tries FUSE_NOTIFY_INC_EPOCH (to test the per-name fallback).
    init(usesEpoch: Bool = true) {
        acceptsEpoch = Locked(usesEpoch ? nil : false, rank: .kernelNotifier)
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        state.withLock(body)
    }

    /// Gives the notifier its session.
    func attach(_ session: OpaquePointer) {
        locked { s in
            s.session = session
            if s.worker == .ended { s.worker = .none }
        }
    }

    /// Takes the session away and waits until no notification uses it and the worker has
    /// ended: the session may be closed and destroyed when this returns. A notification still
    /// in the kernel may wait there for a directory's lock that a request holds, which no
    /// thread of the daemon will read any more once its loop has ended: `unblock` (run only
    /// when one is) must end the connection, which ends that request.
    func detach(unblocking unblock: () -> Void = {}) {
        let inKernel = locked { s -> Bool in
            s.session = nil
            return s.users > 0
        }
        wake.broadcast()
        if inKernel { unblock() }
        state.withLock(when: { $0.users == 0 && $0.worker != .running }, on: idle) { _ in }
    }

    /// `body` is run by the worker in place of the names queued when they would have been
    /// more than `queueLimit`: it must make the kernel forget every name.
    func whenOverflowing(_ body: @escaping @Sendable () -> Void) {
        locked { $0.overflowHandler = body }
    }

    /// Runs `body` with the session, counted as a user of it; false without a session.
    @discardableResult
    private func withSession(_ body: (OpaquePointer) -> Void) -> Bool {
        guard let se = locked({ s -> OpaquePointer? in
            if s.session != nil { s.users += 1 }
            return s.session
        }) else { return false }
        LockOrder.willNotifyKernel()
        body(se)
        let last = locked { s -> Bool in
            s.users -= 1
            return s.users == 0
        }
        if last { idle.broadcast() }
        return true
    }

    /// Marks every name the kernel cached (positive or negative) as needing a new lookup, in
    /// one message. False when the kernel does not know the message (before Linux 6.16).
    func expireAllNames() -> Bool {
        if acceptsEpoch.withLock({ $0 }) == false { return false }
        var accepted = false
        guard withSession({ accepted = pb_notify_bare($0, 8 /* FUSE_NOTIFY_INC_EPOCH */) == 0 }) else { return false }
        acceptsEpoch.withLock { $0 = accepted }
        return accepted
    }

    /// Drops the kernel's entry for `name` in `parent` (not cached: nothing to do).
    func invalidateName(_ name: [UInt8], in parent: NodeID) {
        withSession { se in _ = name.withCStringCopy { fuse_lowlevel_notify_inval_entry(se, parent, $0, name.count) } }
    }

    /// Drops the kernel's attributes of `node` only (its pages stay).
    func invalidateAttributes(of node: NodeID) {
        withSession { _ = fuse_lowlevel_notify_inval_inode($0, node, -1, 0) }
    }

    /// Drops the kernel's attributes of `node` and every cached page (file data, symlink
    /// target, directory listing).
    func invalidateNode(_ node: NodeID) {
        withSession { _ = fuse_lowlevel_notify_inval_inode($0, node, 0, 0) }
    }

    /// Drops the kernel's entries for `names` from the worker thread, once the reply of the
    /// request that asks lets go of the directories' locks (an entry's invalidation waits for
    /// its directory's lock).
    func invalidateNamesLater(_ names: [(parent: NodeID, name: [UInt8])]) {
        guard !names.isEmpty else { return }
        let starts = locked { s -> Bool in
            guard s.session != nil else { return false }
            if s.overflowed || s.queued.count + names.count > KernelNotifier.queueLimit {
                s.queued = []
                s.overflowed = true
            } else {
                s.queued += names
            }
            guard s.worker == .none else { return false }
            s.worker = .running
            return true
        }
        wake.signal()
        if starts && !DetachedThread.start({ self.work() }) {
            // no thread to be had: the names stay cached until an invalidation
            locked { s in
                s.queued = []
                s.overflowed = false
                s.worker = .none
            }
            idle.broadcast()
        }
    }

    /// The worker: notifies what is queued, waiting for more, until the session goes.
    private func work() {
        while true {
            let batch = state.withLock(when: { !$0.queued.isEmpty || $0.overflowed || $0.session == nil }, on: wake) {
                s -> (names: [(parent: NodeID, name: [UInt8])], overflowed: (@Sendable () -> Void)?)? in
                guard s.session != nil else {
                    s.queued = []
                    s.overflowed = false
                    s.worker = .ended
                    return nil
                }
                defer {
                    s.queued = []
                    s.overflowed = false
                }
                return (s.queued, s.overflowed ? (s.overflowHandler ?? {}) : nil)
            }
            guard let batch else { return idle.broadcast() }
            if let overflowed = batch.overflowed {
                overflowed()
            } else {
                for key in batch.names { invalidateName(key.name, in: key.parent) }
            }
        }
    }

    /// Tells the kernel what a request's changes left for it to forget (other spellings, where
    /// names fold; kept in the request while its changes held the daemon's locks), before its
    /// reply: the nodes' attributes and pages at once; the names by telling it to look every
    /// name up again (one message, FUSE_NOTIFY_INC_EPOCH, which takes no lock, so that no later
    /// request of the caller finds an outdated one). A kernel that does not know that message (before
    /// 6.16) is told of each name by the worker, once the reply lets go of the directory's
    /// lock: a short while in which an old answer may still be found.
    @inline(__always)
    func deliverBeforeReply(_ forgets: KernelForgets?) {
        guard let forgets else { return }
        forgets.nodes.forEach(invalidateNode)
        if forgets.names.isEmpty || expireAllNames() { return }
        invalidateNamesLater(forgets.names)
    }
}
