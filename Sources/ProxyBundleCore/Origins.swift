#if canImport(Glibc)
import Glibc
#endif

/// Inode numbers that outlive copy-up: a main-bundle entry copied into the substitution (by a
/// copy-up or by materializing its directory) keeps showing the number it had, so tools that
/// compare numbers (sqlite, tar, rsync's hard-link detection) see the same file. The number is
/// kept per substitution inode, for as long as the daemon runs (not across a remount), whether
/// or not the kernel still knows the node.
///
/// The numbers belong to the substitution layer (`Overlay.Top`): a swapped substitution
/// starts without any. A number is dropped when the daemon removes the copy's last link or creates an entry that
/// got the same substitution inode (a reused number). A copy deleted directly in the
/// substitution leaves its number behind until the inode is reused through the mount.
struct Origins: Sendable {
    /// Reported substitution inode number → the number shown instead.
    private var shown: [UInt64: UInt64] = [:]

    var isEmpty: Bool { shown.isEmpty }

    func number(for upperNumber: UInt64) -> UInt64? {
        shown.isEmpty ? nil : shown[upperNumber]
    }

    mutating func record(_ origin: UInt64, for upperNumber: UInt64) {
        // a copy of a copy keeps the first number
        shown[upperNumber] = shown[origin] ?? origin
    }

    mutating func drop(_ upperNumber: UInt64) {
        if !shown.isEmpty { shown[upperNumber] = nil }
    }
}

extension Overlay {
    /// The inode number shown for `ino` of the substitution (`inUpper`) or the main bundle.
    func shownInode(_ ino: ino_t, inUpper: Bool) -> ino_t {
        shownInodes().number(ino, inUpper: inUpper)
    }

    /// The numbering as it is now, to number many entries under one lock (a listing).
    func shownInodes() -> ShownInodes {
        top.withLock { ShownInodes(inodes: $0.inodes, origins: $0.origins) }
    }

    struct ShownInodes {
        let inodes: InodeNumbers
        let origins: Origins

        func number(_ ino: ino_t, inUpper: Bool) -> ino_t {
            let number = inodes.number(ino, inUpper: inUpper)
            guard inUpper, let origin = origins.number(for: UInt64(number)) else { return number }
            return ino_t(origin)
        }
    }

    var hasOrigins: Bool { top.withLock { !$0.origins.isEmpty } }

    /// The copy at `path` of the substitution shows `origin` (a main-bundle entry's own number).
    func recordOrigin(_ origin: ino_t, forCopyAt path: LayerPath) {
        guard let st = try? upper.attributes(path) else { return }
        recordOrigin(origin, forCopyInode: st.st_ino)
    }

    /// The same, for the substitution's inode `copy` (a rename keeps a file's inode).
    func recordOrigin(_ origin: ino_t, forCopyInode copy: ino_t) {
        recordShown(inodes.number(origin, inUpper: false), forUpperInode: copy)
    }

    /// The substitution's inode `ino` shows `shown` (a number as the mount reported it).
    func recordShown(_ shown: ino_t, forUpperInode ino: ino_t) {
        top.withLock { $0.origins.record(UInt64(shown), for: UInt64($0.inodes.number(ino, inUpper: true))) }
    }

    /// The substitution's inode `ino` is new or gone: it shows its own number again.
    func dropOrigin(ofUpperInode ino: ino_t) {
        top.withLock { $0.origins.drop(UInt64($0.inodes.number(ino, inUpper: true))) }
    }
}
