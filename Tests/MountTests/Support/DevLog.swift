import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// /dev/log in the state a test needs, on any machine, and put back as it was. The daemon
/// (like glibc's syslog) always uses /dev/log, so the test takes that path over: a datagram
/// socket of its own, in `directory`, is bind-mounted onto /dev/log (onto an empty file made
/// for it where the machine has no /dev/log). A syslog daemon's socket is never touched; its
/// messages go to the test's socket only while it is mounted, and a bind mount left by a
/// crashed test is gone at the next boot.
final class DevLog {
    static let path = "/dev/log"
    /// Whether the machine has no /dev/log: only then can a test see it missing (ENOENT).
    static var isMissing: Bool { Disk.lstatError(path) == ENOENT }

    private let fd: Int32
    private let placeholder: Bool

    /// `listening`: messages sent to /dev/log are read by `receive`; otherwise the socket is
    /// closed at once and connecting to /dev/log is refused (ECONNREFUSED).
    init(in directory: String, listening: Bool) throws {
        let socketPath = directory + "/dev-log.socket"
        unlink(socketPath)
        fd = try DevLog.bound(socketPath)
        if !listening { close(fd) }
        placeholder = DevLog.isMissing
        if placeholder { close(open(DevLog.path, O_CREAT | O_WRONLY, 0o666)) }
        guard mount(socketPath, DevLog.path, nil, UInt(MS_BIND), nil) == 0 else {
            let code = errno
            if placeholder { unlink(DevLog.path) }
            throw TestFailure("bind \(socketPath) onto \(DevLog.path): errno \(code)")
        }
    }

    /// Puts /dev/log back as it was.
    func remove() {
        _ = umount2(DevLog.path, Int32(MNT_DETACH))
        if placeholder { unlink(DevLog.path) }
        close(fd)
    }

    /// Messages received until one satisfies `done`, or `seconds` pass without one.
    func receive(seconds: Int = 10, until done: (String) -> Bool) -> [String] {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var messages: [String] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        while !messages.contains(where: done) {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            messages.append(String(decoding: buffer[..<count], as: UTF8.self))
        }
        return messages
    }

    private static func bound(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        guard path.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw TestFailure("socket path too long: \(path)")
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw TestFailure("bind \(path): errno \(code)")
        }
        return fd
    }
}
