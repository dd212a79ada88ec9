import Logging
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol (sd_notify(3)) without libsystemd: a datagram such as
/// `READY=1` to the socket `$NOTIFY_SOCKET` names, a path or, written with a leading `@`,
/// an abstract name. A unit of `Type=notify` counts as started when it arrives, so units
/// ordered after it never race the mount.
enum SystemdNotify {
    static let variable = "NOTIFY_SOCKET"

    /// The socket systemd gave, taken out of the environment (as sd_notify's
    /// `unset_environment` does: nothing the daemon starts sends in its name).
    static func takeSocket() -> [UInt8]? {
        guard let value = getenv(variable) else { return nil }
        let path = RawPath(cString: value).bytes
        unsetenv(variable)
        return path.isEmpty ? nil : path
    }

    /// Sends `message`; 0, or the errno why it could not be sent.
    static func send(_ message: String, to path: [UInt8]) -> Int32 {
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity, path.first == UInt8(ascii: "/") || path.first == UInt8(ascii: "@") else { return EINVAL }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.enumerated() { raw[index] = byte }
            if path.first == UInt8(ascii: "@") { raw[0] = 0 }  // abstract: no terminating NUL counts
        }
        let length = socklen_t((MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2) + path.count)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        let sent = message.withCString { text in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, text, strlen(text), 0, $0, length) }
            }
        }
        return sent < 0 ? errno : 0
    }

    /// Sends READY=1 to `socket` once the mount on `mountpoint` answers, from a thread of its
    /// own: the answer needs the request loop, which the caller is about to run. Gives up
    /// (with a warning) when the mount has not answered within 30 s.
    static func readyWhenAnswering(_ mountpoint: RawPath, socket: [UInt8], logger: Logger) {
        let started = DetachedThread.start {
            for _ in 0..<3000 {
                if Daemon.answers(mountpoint) {
                    let error = send("READY=1\nSTATUS=serving \(mountpoint)", to: socket)
                    if error != 0 { logger.warning("cannot tell systemd the mount is ready: \(Errno(error).name)") }
                    return
                }
                usleep(10_000)
            }
            logger.warning("the mount did not answer within 30 s; systemd was not told it is ready")
        }
        if !started { logger.warning("cannot start the thread that tells systemd the mount is ready") }
    }
}
