import ArgumentParser
import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a proxybundle mount, also one whose daemon has died.",
        discussion: """
            Returns once the daemon has exited. A daemon that does not answer within 2 s \
            has its connection aborted and the mount detached; one that answers gets up to 30 s \
            after the unmount to finish its requests and exit.
            Example:
              proxybundle unmount /mnt/myapp
            """
    )

    @Argument(help: "The mountpoint to unmount.")
    var mountpoint: String

    func run() throws {
        let mountpoint = RawPath(argument: self.mountpoint)
        let path = Paths.absolute(mountpoint)
        guard let mount = MountTable.current().mount(at: path) else {
            throw Failure("\(mountpoint) is not mounted")
        }
        guard mount.type.hasPrefix("fuse") else {
            throw Failure("\(mountpoint) is a \(mount.type) mount, not a proxybundle mount")
        }
        let running = RunningMount.at(path)
        if running?.error == ETIMEDOUT {
            try detachHung(path, device: mount.device, shownAs: mountpoint)
            return
        }
        // the daemon, pinned before the unmount so its pid cannot be reused meanwhile
        let daemon = running?.pid.map { pb_pidfd_open($0) } ?? -1
        defer { if daemon >= 0 { close(daemon) } }
        try unmount(path, shownAs: mountpoint)
        if daemon >= 0 && !UnmountCommand.waitForExit(daemon, seconds: 30) {
            throw Failure("\(mountpoint) is unmounted, but its daemon has not exited after 30 seconds")
        }
    }

    private func unmount(_ path: RawPath, shownAs mountpoint: RawPath) throws(Failure) {
        if getuid() == 0 {
            if path.withCString({ umount2($0, 0) }) != 0 {
                let code = errno
                if code == EBUSY { throw Failure("\(mountpoint) is busy (a process is using it)") }
                // a dead daemon's mount that will not go normally is detached
                if path.withCString({ umount2($0, Int32(MNT_DETACH)) }) != 0 {
                    throw Failure("cannot unmount \(mountpoint): \(Errno(code).description)")
                }
            }
            return
        }
        try Unprivileged.fusermount([Array("-u".utf8), path.bytes])
    }

    /// A daemon that does not answer: its connection is aborted (so nothing stays blocked on
    /// it; root only, through fusectl) and the mount detached, even while files are open.
    private func detachHung(_ path: RawPath, device: String, shownAs mountpoint: RawPath) throws(Failure) {
        guard getuid() == 0 else {
            try Unprivileged.fusermount([Array("-u".utf8), Array("-z".utf8), path.bytes])
            return
        }
        let connections = "/sys/fs/fuse/connections"
        if let minor = device.split(separator: ":").last {
            var st = statvfs()
            if statvfs(connections + "/\(minor)", &st) != 0 { _ = Glibc.mount("fusectl", connections, "fusectl", 0, nil) }
            let fd = open(connections + "/\(minor)/abort", O_WRONLY | O_CLOEXEC)
            if fd >= 0 {
                _ = write(fd, "1", 1)
                close(fd)
            }
        }
        if path.withCString({ umount2($0, Int32(MNT_DETACH)) }) != 0 {
            throw Failure("cannot unmount \(mountpoint): \(Errno(errno).description)")
        }
    }

    /// Waits until the process behind `pidfd` has exited.
    static func waitForExit(_ pidfd: Int32, seconds: Int32) -> Bool {
        var poller = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&poller, 1, seconds * 1000)
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }
}

/// Unmounting as an ordinary user goes through the setuid helper fusermount3.
enum Unprivileged {
    /// Runs fusermount3 with `arguments` (bytes: a path need not be UTF-8).
    static func fusermount(_ arguments: [[UInt8]]) throws(Failure) {
        guard case .success(let pid) = Spawn.start("fusermount3", [Array("fusermount3".utf8)] + arguments) else {
            throw Failure("cannot run fusermount3 (install the fuse3 package)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else {
            throw Failure("fusermount3 \(ByteText(bytes: Array(arguments.joined(separator: " ".utf8)))) failed")
        }
    }
}
