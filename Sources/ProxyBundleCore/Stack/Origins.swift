#if canImport(Glibc)
import Glibc
#endif

/// Inode numbers that outlive copy-up: a main-bundle entry copied into the substitution (by a
/// copy-up or by materializing its directory) keeps showing the number it had, so tools that
/// compare numbers (sqlite, tar, rsync's hard-link detection) see the same file. The number is
/// kept per substitution inode, for as long as the daemon runs (not across a remount), whether
/// or not the kernel still knows the node.
///
/// The numbers belong to the substitution (`Substitution`): a swapped substitution
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

/// The numbers a request's view shows (see `InodeNumbers`, `Origins`).
extension Request {
    /// `st` with the inode number the mount shows for it (see `InodeNumbers`, `Origins`).
    func shown(_ st: stat) -> stat {
        var result = st
        let number = view.inodes.number(st.st_ino, device: UInt64(st.st_dev))
        result.st_ino = number
        // only a substitution inode can be a copy
        if let top = view.layers.substitution, UInt64(st.st_dev) == top.layer.device,
           let origin = top.origin(of: UInt64(number)) {
            result.st_ino = ino_t(origin)
        }
        return result
    }

    /// `shown(st)` for the entry at `placement`: a directory merged from several layers has a
    /// link count of 1, as on kernel overlayfs (no layer's own count is right for it, and a
    /// tool that counts subdirectories by it would skip some: 1 tells it not to).
    func shown(_ st: stat, _ placement: Placement) -> stat {
        var result = shown(st)
        if placement.isDirectory && placement.top != placement.bottom { result.st_nlink = 1 }
        return result
    }

    /// The numbering as it is now, to number many entries under one lock (a listing).
    func shownInodes() -> ShownInodes {
        let top = view.layers.substitution
        return ShownInodes(inodes: view.inodes, origins: top?.origins ?? Origins(), substitution: top?.layer.device ?? 0)
    }

    var hasOrigins: Bool { !(layers.substitution?.origins.isEmpty ?? true) }

    /// The copy at `path` of the substitution shows `origin` (the number the mount showed for
    /// the entry copied).
    func recordOrigin(_ origin: ino_t, forCopyAt path: LayerPath) {
        guard let st = try? substitution.attributes(path) else { return }
        recordOrigin(origin, forCopyInode: st.st_ino)
    }

    /// The substitution's inode `copy` shows `shown` (a number as the mount reported it; a
    /// rename keeps a file's inode).
    func recordOrigin(_ shown: ino_t, forCopyInode copy: ino_t) {
        guard let top = layers.substitution else { return }
        let number = view.inodes.number(copy, device: top.layer.device)
        top.changeOrigins { $0.record(UInt64(shown), for: UInt64(number)) }
    }

    /// The substitution's inode `ino` is new or gone: it shows its own number again.
    func dropOrigin(ofSubstitutionInode ino: ino_t) {
        guard let top = layers.substitution else { return }
        let number = view.inodes.number(ino, device: top.layer.device)
        top.changeOrigins { $0.drop(UInt64(number)) }
    }
}

/// A request's numbering as it is, to number many entries under one lock (a listing).
struct ShownInodes {
    let inodes: InodeNumbers
    let origins: Origins
    /// The substitution's file system: only its inodes can be copies.
    let substitution: UInt64

    func number(_ st: stat) -> ino_t {
        number(st.st_ino, device: UInt64(st.st_dev))
    }

    func number(_ ino: ino_t, device: UInt64) -> ino_t {
        let number = inodes.number(ino, device: device)
        guard device == substitution, let origin = origins.number(for: UInt64(number)) else { return number }
        return ino_t(origin)
    }
}
