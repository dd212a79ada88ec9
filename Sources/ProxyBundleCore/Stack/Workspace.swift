#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The copy-up work directory: `.wh..wh.work` at the root of the substitution, so it is never
/// shown and lies on the same file system as the entries renamed out of it. Made when first
/// needed, made again whenever an updater removed or moved it (`rsync --delete`, `find
/// -delete`), and removed at a clean unmount, so that the substitution holds nothing of the
/// daemon's while it is not mounted. Whatever a crash left in it is removed at the next mount.
final class Workspace: Sendable {
    static let name: [UInt8] = Whiteout.reservedPrefix + Array("work".utf8)

    let fd: Int32
    /// Which directory it is, to tell whether it is still the one at its name.
    private let device: UInt64
    private let inode: UInt64
    private let counter = Locked<UInt64>(0, rank: .workspace)

    /// Opens the work directory of `substitution`, making it if missing (the substitution's
    /// times put back: the hidden directory changes nothing visible).
    init(in substitution: Layer) throws(Errno) {
        try Workspace.name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            try Workspace.keepingTimes(of: substitution) { () throws(Errno) in
                if mkdirat(substitution.rootFD, p, 0o700) != 0 && errno != EEXIST { throw Errno.current }
            }
        }
        fd = try substitution.open(LayerPath(bytes: Workspace.name), flags: O_RDONLY | pb_O_DIRECTORY)
        let st = try Sys.fstat(fd)
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
    }

    deinit { Sys.close(fd) }

    /// Whether this is still the work directory of `substitution` (not removed, not moved).
    func isInPlace(in substitution: Layer) -> Bool {
        guard let st = try? Workspace.name.withCStringCopy({ (p: UnsafePointer<CChar>) throws(Errno) -> stat in
            try Sys.lstatat(substitution.rootFD, p)
        }) else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }

    /// Removes the work directory of `substitution` and all it holds, if there is one (what a
    /// crash left, or the daemon's own at unmount); the substitution's times are put back.
    static func remove(from substitution: Layer) {
        guard (try? name.withCStringCopy({ (p: UnsafePointer<CChar>) throws(Errno) -> stat in
            try Sys.lstatat(substitution.rootFD, p)
        })) != nil else { return }
        try? keepingTimes(of: substitution) { () throws(Errno) in try removeTree(name, in: substitution.rootFD) }
    }

    /// Runs `change` on the substitution's root, then puts back the root's times.
    private static func keepingTimes(of substitution: Layer, _ change: () throws(Errno) -> Void) throws(Errno) {
        let root = try Sys.fstat(substitution.rootFD)
        try change()
        var times = [root.st_atim, root.st_mtim]
        _ = utimensat(substitution.rootFD, ".", &times, 0)
    }

    /// A fresh name for a temporary entry in the work directory.
    func temporaryName() -> [UInt8] {
        let n = counter.withLock { value -> UInt64 in
            value += 1
            return value
        }
        return Array("tmp-\(getpid())-\(n)".utf8)
    }

    /// Removes `name` in `dirfd`, and everything below it if it is a directory.
    static func removeTree(_ name: [UInt8], in dirfd: Int32) throws(Errno) {
        try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            if unlinkat(dirfd, p, 0) == 0 { return }
            guard errno == EISDIR else { throw Errno.current }
            let child = try Sys.openat2(dirfd, p, flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                        resolve: Layer.resolve)
            defer { Sys.close(child) }
            let list = try Sys.entries(of: child)
            for entry in list.entries { try removeTree(list.name(entry), in: child) }
            _ = try Sys.check { unlinkat(dirfd, p, AT_REMOVEDIR) }
        }
    }
}
extension Sys {
    /// The names in a directory just opened for reading as `fd` (not "." and ".."), read by
    /// the one directory reader straight into the list. `fd` stays open, at its end.
    static func entries(of fd: Int32) throws(Errno) -> EntryList {
        var result = EntryList()
        guard let reader = pb_directory_begin(fd) else { throw Errno.current }
        defer { pb_directory_end(reader) }
        var entry = pb_directory_entry()
        var first = true
        while true {
            let found = pb_directory_next(reader, &entry)
            if found == 0 { return result }
            if found < 0 { throw Errno.current }
            if first && pb_directory_is_large(reader) != 0 {
                // more to come: a directory's size bounds its names on ext4 and most disk file
                // systems (entries of at least 12 bytes); where it does not (tmpfs, some network
                // file systems), the buffers grow
                if let size = try? fstat(fd).st_size, size > 4096 {
                    let bound = Int(min(size, 64 << 20))
                    result.reserve(bound / 24, nameBytes: bound)
                }
            }
            first = false
            result.append(entry.bytes, type: entry.type, inode: entry.inode)
        }
    }
}
