#if canImport(Glibc)
import Glibc
#endif

/// A POSIX error number. Never zero: the FUSE dispatcher replies with it as a failure.
public struct Errno: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    public let code: Int32

    public init(_ code: Int32) {
        self.code = code == 0 ? EIO : code
    }

    /// The calling thread's `errno`.
    public static var current: Errno { Errno(errno) }

    public static let noEntry = Errno(ENOENT)
    public static let io = Errno(EIO)
    public static let readOnly = Errno(EROFS)
    public static let notPermitted = Errno(EPERM)
    public static let invalid = Errno(EINVAL)
    public static let nameTooLong = Errno(ENAMETOOLONG)
    public static let notDirectory = Errno(ENOTDIR)
    public static let isDirectory = Errno(EISDIR)
    public static let noData = Errno(ENODATA)
    public static let range = Errno(ERANGE)
    public static let accessDenied = Errno(EACCES)
    public static let stale = Errno(ESTALE)

    public var description: String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }
}
