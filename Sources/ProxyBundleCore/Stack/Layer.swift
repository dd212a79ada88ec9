#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// One directory tree of the overlay, reached only through the descriptor of its root.
/// Every access resolves beneath that root and never follows a symlink, so nothing inside
/// a layer can lead the daemon to a file outside it.
public final class Layer: Sendable {
    /// The root every access resolves beneath: for a read-only layer, where the daemon may,
    /// the root of a detached read-only, noatime copy of its mount (see `init`).
    public let rootFD: Int32
    /// Where the root was when the layer was opened, with every symlink resolved (nil if it
    /// could not be told): the layer's directory for the checks that keep layers apart.
    public let canonicalPath: RawPath?
    /// The root as opened at `path`, kept beside a read-only copy only where asked
    /// (`keepsPath`): for the main bundle, which a mount may cover, `proxybundle which` finds
    /// the covered directory through this descriptor in /proc. Else -1: one descriptor a layer.
    let pathFD: Int32
    public let device: UInt64
    /// The root directory's inode number: with `device`, which directory the layer is.
    public let inode: UInt64
    /// The path the layer was opened at, as given (bytes, not necessarily UTF-8): for people
    /// (`.layers`, `.stats`, `which`).
    public let path: RawPath
    /// Whether reads leave access times alone (`O_NOATIME`, where the daemon may use it): the
    /// main bundle's and the patches', which nothing changes, not even reading them.
    let preservesAccessTimes: Bool
    /// How the layer, written, treats access times: the substitution's are the mount's own.
    public let accessTimes: AccessTimes
    /// How the layer spells its names, for a mount that folds them (`-o casefold`); nil
    /// where names are matched byte for byte. Every path given to the layer is then spelled
    /// its way before use (see `spelled`).
    public let spellings: Spellings?
    /// What a patch holds, directory by directory, once read (see `LayerIndex`); nil for the
    /// main bundle and the substitution, which are looked in directly, and where names fold.
    let index: LayerIndex?

    /// The mount's access-time options (noatime, nodiratime) that a writable layer is reached
    /// with, as kernel overlayfs reaches its upper layer: under noatime, reading or running a
    /// substitution file, or listing a directory, through the mount leaves its access time alone.
    public struct AccessTimes: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let noatime = AccessTimes(rawValue: 1)
        public static let nodiratime = AccessTimes(rawValue: 2)

        var mountAttributes: UInt64 {
            (contains(.noatime) ? pb_MOUNT_ATTR_NOATIME : 0) | (contains(.nodiratime) ? pb_MOUNT_ATTR_NODIRATIME : 0)
        }
    }

    static let resolve = pb_RESOLVE_BENEATH | pb_RESOLVE_NO_SYMLINKS | pb_RESOLVE_NO_MAGICLINKS

    /// Opens the layer's root. `path` is the user's argument and may itself contain symlinks.
    /// A layer that `preservesAccessTimes` (a read-only one) is reached, where the daemon has
    /// CAP_SYS_ADMIN, through a detached copy of its mount made read-only and noatime: the
    /// kernel itself then refuses any write to it, and leaves its access times alone also where
    /// it reads a file itself (a passthrough open gets a file of the kernel's own, without the
    /// daemon's O_NOATIME). A writable layer with `accessTimes` is reached through a detached
    /// copy of its mount given those options, for the same reason. Elsewhere the root is used
    /// as it is.
    /// `indexed`: a patch, whose directories are kept in an index as they are read (not
    /// where names fold).
    public init(path: RawPath, preservesAccessTimes: Bool = false, accessTimes: AccessTimes = [],
                keepsPath: Bool = false, foldsNames: Bool = false, indexed: Bool = false) throws(Errno) {
        self.preservesAccessTimes = preservesAccessTimes
        spellings = foldsNames ? Spellings() : nil
        index = indexed && !foldsNames ? LayerIndex() : nil
        self.accessTimes = accessTimes
        self.path = path
        let fd = try Sys.check { path.withCString { Glibc.open($0, pb_O_PATH | pb_O_DIRECTORY | pb_O_CLOEXEC) } }
        let st: stat
        do throws(Errno) {
            st = try Sys.fstat(fd)
        } catch {
            Sys.close(fd)
            throw error
        }
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        canonicalPath = Layer.path(of: fd)
        let attributes = preservesAccessTimes ? pb_MOUNT_ATTR_RDONLY | pb_MOUNT_ATTR_NOATIME : accessTimes.mountAttributes
        let clone = attributes != 0 ? pb_clone_mount(fd, attributes) : -1
        // one descriptor a layer, so that thousands of layers fit the open-file limit
        pathFD = clone >= 0 && keepsPath ? fd : -1
        if clone >= 0 && !keepsPath { Sys.close(fd) }
        rootFD = clone >= 0 ? clone : fd
    }

    /// The layer at the path whose bytes are `path`'s UTF-8.
    public convenience init(path: String, preservesAccessTimes: Bool = false, accessTimes: AccessTimes = [],
                            foldsNames: Bool = false, indexed: Bool = false) throws(Errno) {
        try self.init(path: RawPath(path), preservesAccessTimes: preservesAccessTimes, accessTimes: accessTimes,
                      foldsNames: foldsNames, indexed: indexed)
    }

    deinit {
        Sys.close(rootFD)
        if pathFD >= 0 { Sys.close(pathFD) }
    }

    /// Opens `path` with `flags`, resolving beneath the root without following symlinks.
    /// The caller owns the descriptor. Opened for reading with `preservingAccessTime` (the
    /// layer's own choice by default), reads through it leave the access time alone where the
    /// daemon may ask for that.
    public func open(_ path: LayerPath, flags: Int32, mode: mode_t = 0,
                     preservingAccessTime: Bool? = nil) throws(Errno) -> Int32 {
        try open(spelled: spelled(path), flags: flags, mode: mode, preservingAccessTime: preservingAccessTime)
    }

    /// `open` of `path` spelled as the layer spells it already (see `spelled`).
    func open(spelled path: LayerPath, flags: Int32, mode: mode_t = 0,
              preservingAccessTime: Bool? = nil) throws(Errno) -> Int32 {
        try withNearestDirectory(path) { (dirfd: Int32, rest: LayerPath) throws(Errno) -> Int32 in
            try rest.withCString { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Layer.open(flags: flags | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                               preservingAccessTime: preservingAccessTime ?? preservesAccessTimes) {
                    (flags: Int32) throws(Errno) -> Int32 in
                    try Sys.openat2(dirfd, p, flags: flags, mode: mode, resolve: Layer.resolve)
                }
            }
        }
    }

    /// Runs `body` with a directory descriptor and the rest of `path` below it, short enough
    /// for one system call: the root and `path` itself, unless `path` is PATH_MAX bytes or
    /// longer; then a directory descriptor deep enough, reached from the root a piece at a
    /// time, each piece resolved beneath the one before without following symlinks (as beneath
    /// the root: no name is ".."). Entries deeper than PATH_MAX work like any other.
    func withNearestDirectory<T>(_ path: LayerPath, _ body: (Int32, LayerPath) throws(Errno) -> T) throws(Errno) -> T {
        guard path.bytes.count >= Int(PATH_MAX) else { return try body(rootFD, path) }
        var pieces = path.pieces(shorterThan: Int(PATH_MAX))
        let rest = pieces.removeLast()
        var dirfd = rootFD
        defer { if dirfd != rootFD { Sys.close(dirfd) } }
        for piece in pieces {
            let next = try piece.withCString { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Sys.openat2(dirfd, p, flags: pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC, resolve: Layer.resolve)
            }
            if dirfd != rootFD { Sys.close(dirfd) }
            dirfd = next
        }
        return try body(dirfd, rest)
    }

    /// Opens with `open`, given `flags` plus O_NOATIME when opened for reading and
    /// `preservingAccessTime`, or without it where the daemon may not ask for it.
    static func open(flags: Int32, preservingAccessTime: Bool,
                     _ open: (Int32) throws(Errno) -> Int32) throws(Errno) -> Int32 {
        if preservingAccessTime && flags & pb_O_PATH == 0 && flags & O_ACCMODE == O_RDONLY {
            do throws(Errno) {
                return try open(flags | pb_O_NOATIME)
            } catch where error.code == EPERM {
                // neither the owner nor CAP_FOWNER: reads may set the access time
            }
        }
        return try open(flags)
    }

    /// Runs `body` with a descriptor of the directory `path` (O_PATH; the root's own for the root).
    public func withDirectory<T>(_ path: LayerPath, _ body: (Int32) throws(Errno) -> T) throws(Errno) -> T {
        try withSpelledDirectory(path) { (fd: Int32, _: LayerPath) throws(Errno) -> T in try body(fd) }
    }

    /// `withDirectory`, given also the directory's path as the layer spells it (see `spelled`).
    func withSpelledDirectory<T>(_ path: LayerPath, _ body: (Int32, LayerPath) throws(Errno) -> T) throws(Errno) -> T {
        let spelled = spelled(path)
        if spelled.isRoot { return try body(rootFD, spelled) }
        let fd = try open(spelled: spelled, flags: pb_O_PATH | pb_O_DIRECTORY)
        defer { Sys.close(fd) }
        return try body(fd, spelled)
    }

    /// Runs `body` with an O_PATH descriptor of the entry at `path` itself (a symlink is not followed).
    public func withEntry<T>(_ path: LayerPath, _ body: (Int32) throws(Errno) -> T) throws(Errno) -> T {
        if path.isRoot { return try body(rootFD) }
        let fd = try open(path, flags: pb_O_PATH)
        defer { Sys.close(fd) }
        return try body(fd)
    }

    /// The attributes of the entry at `path` (lstat semantics).
    public func attributes(_ path: LayerPath) throws(Errno) -> stat {
        if path.isRoot { return try Sys.fstat(rootFD) }
        if path.isSingleName {
            // one name directly under the root cannot lead outside it
            return try spelled(path).withCString { (p: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(rootFD, p) }
        }
        return try withEntry(path) { (fd: Int32) throws(Errno) -> stat in try Sys.fstat(fd) }
    }

    public func readLink(_ path: LayerPath) throws(Errno) -> [UInt8] {
        try withEntry(path) { (fd: Int32) throws(Errno) -> [UInt8] in
            do throws(Errno) {
                return try Sys.readlinkat(fd, "")
            } catch let error where error.code == ENOENT {
                throw Errno.invalid  // with an empty path, the kernel's answer for "not a symlink"
            }
        }
    }

    public func extendedAttribute(_ path: LayerPath, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        try withEntry(path) { (fd: Int32) throws(Errno) -> [UInt8] in try Sys.getxattr(fd: fd, name: name) }
    }

    public func extendedAttributeNames(_ path: LayerPath) throws(Errno) -> [UInt8] {
        try withEntry(path) { (fd: Int32) throws(Errno) -> [UInt8] in try Sys.listxattr(fd: fd) }
    }

    /// A directory's entries in one layer of a stack, by the layer's number.
    typealias Entries = (layer: Int, list: EntryList)

    /// Every entry of the directory at `path`, except "." and "..", in on-disk order. Character
    /// devices (and entries of unknown type) are looked at: a 0/0 device is a whiteout.
    /// Where names fold, the entries of every real directory the directory merges in the
    /// layer, one spelling of each key (see `entries(of:)`).
    public func entries(_ path: LayerPath) throws(Errno) -> EntryList {
        if spellings != nil {
            let (found, deepest) = try spelledDirectories(path)
            guard let found else { throw Errno.noEntry }
            if found.paths.count > 1 { return try mergedEntries(of: found) }
            return try entries(spelled: deepest)
        }
        return try entries(spelled: path)
    }

    /// The entries of the directory at `path` spelled as the layer spells it.
    func entries(spelled path: LayerPath) throws(Errno) -> EntryList {
        let fd = try open(spelled: path, flags: O_RDONLY | pb_O_DIRECTORY)
        defer { Sys.close(fd) }
        return try Layer.entries(of: fd)
    }

    /// The entries of the directory open for reading as `fd` (and not read before).
    static func entries(of fd: Int32) throws(Errno) -> EntryList {
        var result = try Sys.entries(of: fd)
        for index in result.entries.indices
        where result.entries[index].type == UInt8(DT_CHR) || result.entries[index].type == UInt8(DT_UNKNOWN) {
            let st = try? result.withNames { (names) throws(Errno) -> stat in
                try Sys.lstatat(fd, names.cString(result.entries[index]))
            }
            guard let st else { continue }
            result.update(index) { entry in
                entry.type = UInt8((st.st_mode & S_IFMT) >> 12)
                entry.inode = UInt64(st.st_ino)
                entry.isWhiteoutDevice = Whiteout.isDevice(st)
            }
        }
        return result
    }

    /// The path /proc names for descriptor `fd`: where it is, every symlink resolved.
    static func path(of fd: Int32) -> RawPath? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return RawPath(bytes: Array(buffer[..<length]))
    }

    public func fileSystemStatistics() throws(Errno) -> statvfs {
        var result = statvfs()
        _ = try Sys.check { fstatvfs(rootFD, &result) }
        return result
    }
}

