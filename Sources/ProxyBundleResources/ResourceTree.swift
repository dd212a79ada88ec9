#if canImport(Glibc)
import Glibc
#endif
import CSyscalls
import ProxyBundleCore

/// What an entry of a tree is, after following symlinks: only a regular file is a resource.
public enum ResourceKind: Equatable, Sendable {
    case file
    case directory
    case other
}

/// A directory tree resources are looked up in: a directory on disk (a bundle, or a
/// proxybundle mount), or layers merged in-process (`LayeredTree`). Paths are relative to the
/// tree's root, with `/` between names and `""` for the root itself.
public protocol ResourceTree {
    /// The kind of the entry at `path`, following symlinks; nil when there is none.
    func kind(of path: String) -> ResourceKind?
    /// The names in the directory at `path`, without `.` and `..`; empty when it has none or
    /// is not a directory.
    func names(in path: String) -> [String]
    /// The first `limit` bytes of the file at `path`, or nil when it cannot be read.
    func contents(of path: String, limit: Int) -> [UInt8]?
    /// Whether names are matched ignoring case and normalization (`CaseFoldedTree`).
    var foldsCase: Bool { get }
    /// The real spelling of `path`, an entry of the tree.
    func spelling(of path: String) -> String
    /// `path` with the symlinks on the way that stay in the tree resolved, where the tree
    /// tells them (a `LayeredTree`); else `path` itself.
    func realPath(_ path: String) -> String
}

extension ResourceTree {
    public var foldsCase: Bool { false }
    public func spelling(of path: String) -> String { path }
    public func realPath(_ path: String) -> String { path }
}

/// A directory on disk: a bundle laid out in a plain directory, or a proxybundle mount, whose
/// merged view every access then goes through.
public final class DirectoryTree: ResourceTree {
    /// The directory as given.
    public let path: String
    private let rootFD: Int32

    /// Opens the directory at `path`. ENOENT, ENOTDIR, EACCES... as `Errno`-style codes.
    public init(path: String) throws(ResourceError) {
        self.path = path
        let fd = Glibc.open(path, pb_O_PATH | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard fd >= 0 else { throw ResourceError(code: errno, path: path) }
        rootFD = fd
    }

    deinit { close(rootFD) }

    public func kind(of path: String) -> ResourceKind? {
        var st = stat()
        guard ResourcePath.staysBeneath(path), fstatat(rootFD, ResourcePath.relative(path), &st, 0) == 0 else { return nil }
        return ResourcePath.kind(st.st_mode)
    }

    public func names(in path: String) -> [String] {
        guard ResourcePath.staysBeneath(path) else { return [] }
        let fd = openat(rootFD, ResourcePath.relative(path), O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var names: [String] = []
        try? readDirectory(fd) { entry in names.append(String(cString: entry.name)) }
        return names
    }

    public func contents(of path: String, limit: Int) -> [UInt8]? {
        guard ResourcePath.staysBeneath(path) else { return nil }
        let fd = openat(rootFD, ResourcePath.relative(path), O_RDONLY | pb_O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return ResourcePath.read(fd, limit: limit)
    }
}

/// A failure to open a tree: the error number and the path it concerns.
public struct ResourceError: Error, CustomStringConvertible, Sendable {
    public var code: Int32
    public var path: String

    public var description: String {
        "\(path): \(Errno(code))"
    }
}

/// Helpers for the `/`-separated relative paths of a tree.
public enum ResourcePath {
    /// `a/b`, where either may be empty.
    public static func join(_ a: String, _ b: String) -> String {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        return a + "/" + b
    }

    /// The names of `path`, without empty ones and `.`.
    public static func names(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init).filter { $0 != "." }
    }

    /// The directory part and the last name of `path`.
    public static func split(_ path: String) -> (directory: String, name: String) {
        var names = names(path)
        let last = names.popLast() ?? ""
        return (names.joined(separator: "/"), last)
    }

    /// Whether `a` comes before `b` in byte order (the order of names in our listings).
    public static func byteOrder(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// Whether `path` names something beneath the root by its names (no `..`, not absolute);
    /// symlinks in the tree may still lead out of it, as they would for the app.
    static func staysBeneath(_ path: String) -> Bool {
        !path.hasPrefix("/") && !names(path).contains("..")
    }

    /// `path` for the *at() calls: `.` for the root.
    static func relative(_ path: String) -> String {
        path.isEmpty ? "." : path
    }

    static func kind(_ mode: mode_t) -> ResourceKind {
        switch mode & S_IFMT {
        case S_IFREG: return .file
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    /// Up to `limit` bytes of open file `fd`.
    static func read(_ fd: Int32, limit: Int) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < limit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, min($0.count, limit - bytes.count)) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }
}
