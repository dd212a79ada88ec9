import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// The daemon of an earlier mount of a substitution that still holds its writer lock after the
/// mount went: `umount` (and `fusermount3 -u`) return as soon as the kernel has let go of the
/// mount, while the daemon still finishes the requests it was serving (the last close of a
/// large removed file can take seconds) and then exits. The kernel drops the lock as the
/// process ends, so a new mount waits for exactly that: the exit, seen on a pidfd.
struct ExitingWriter {
    let pid: pid_t

    /// How long a new mount waits for such a daemon, as `unmount` waits for a daemon's exit.
    static let patience: Int32 = 30

    /// The proxybundle daemon holding the `flock` of the directory open as `fd`, if it is one
    /// in this mount namespace (so that its mount, were it alive, would be in this table).
    static func holding(_ fd: Int32) -> ExitingWriter? {
        var st = stat()
        guard fstat(fd, &st) == 0, let pid = flockHolder(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)),
              pid != getpid(), isDaemon(pid), sameMountNamespace(pid) else { return nil }
        return ExitingWriter(pid: pid)
    }

    /// Waits until the daemon has exited or the mount table changed (a mount may have started
    /// writing the substitution), for at most `seconds`. False when the time ran out.
    func waitForExitOrMountChange(seconds: Int32) -> Bool {
        let pidfd = pb_pidfd_open(pid)
        guard pidfd >= 0 else { return true }  // gone already
        defer { close(pidfd) }
        let table = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)
        defer { if table >= 0 { close(table) } }
        var pollers = [pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: table, events: Int16(POLLPRI), revents: 0)]
        while true {
            let ready = poll(&pollers, table >= 0 ? 2 : 1, seconds * 1000)
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }

    /// The process that holds a `flock` on the inode, from /proc/locks (lines such as
    /// `1: FLOCK  ADVISORY  WRITE 4157 fd:00:1234 0 EOF`; a waiter's line has `->`).
    private static func flockHolder(device: UInt64, inode: UInt64) -> pid_t? {
        var error: Int32 = 0
        guard let bytes = readBytes("/proc/locks", error: &error) else { return nil }
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let wanted = hex2(major) + ":" + hex2(minor) + ":" + String(inode)
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let words = line.split(separator: " ")
            guard words.count >= 6, words[1] == "FLOCK", words[5] == wanted else { continue }
            return pid_t(words[4])
        }
        return nil
    }

    /// `%02x`, as /proc/locks writes a device's numbers.
    private static func hex2(_ number: UInt64) -> String {
        let text = String(number, radix: 16)
        return text.count < 2 ? "0" + text : text
    }

    /// Whether `pid` runs the daemon image (see `DaemonImage.marker`).
    private static func isDaemon(_ pid: pid_t) -> Bool {
        var error: Int32 = 0
        guard let cmdline = readBytes(RawPath("/proc/\(pid)/cmdline"), error: &error) else { return false }
        let words = cmdline.split(separator: 0)
        return words.count > 1 && Array(words[1]) == Array(DaemonImage.marker.utf8)
    }

    private static func sameMountNamespace(_ pid: pid_t) -> Bool {
        guard let own = namespace("/proc/self/ns/mnt"), let other = namespace("/proc/\(pid)/ns/mnt") else { return false }
        return own == other
    }

    private static func namespace(_ path: String) -> [UInt8]? {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = readlink(path, &buffer, buffer.count)
        return count > 0 ? buffer[..<count].map { UInt8(bitPattern: $0) } : nil
    }
}
