import Foundation

/// The fuse module's io_uring switch (`enable_uring`), machine-wide: set by a test and put back
/// as it was in its tearDown, whatever happened.
enum UringSwitch {
    static let path = "/sys/module/fuse/parameters/enable_uring"

    /// `Y` or `N`, or nil where the kernel has no FUSE over io_uring.
    static var value: String? {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func set(_ value: String) throws {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        let bytes = Array(value.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { throw TestFailure("write \(path): errno \(errno)") }
        guard self.value == value else { throw TestFailure("\(path) is \(self.value ?? "gone") after writing \(value)") }
    }
}
