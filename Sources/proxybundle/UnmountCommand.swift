import ArgumentParser
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a proxybundle mount, also one whose daemon has died.",
        discussion: """
            Example:
              proxybundle unmount /mnt/myapp
            """
    )

    @Argument(help: "The mountpoint to unmount.")
    var mountpoint: String

    func run() throws {
        let path = Paths.absolute(mountpoint)
        guard let mount = MountTable.current().mount(at: path) else {
            throw Failure("\(mountpoint) is not mounted")
        }
        guard mount.type.hasPrefix("fuse") else {
            throw Failure("\(mountpoint) is a \(mount.type) mount, not a proxybundle mount")
        }
        if getuid() == 0 {
            if umount2(path, 0) != 0 {
                let code = errno
                if code == EBUSY { throw Failure("\(mountpoint) is busy (a process is using it)") }
                // a dead daemon's mount that will not go normally is detached
                if umount2(path, Int32(MNT_DETACH)) != 0 {
                    throw Failure("cannot unmount \(mountpoint): \(Paths.describe(code))")
                }
            }
            return
        }
        try Unprivileged.fusermount(["-u", path])
    }
}

/// Unmounting as an ordinary user goes through the setuid helper fusermount3.
enum Unprivileged {
    static func fusermount(_ arguments: [String]) throws(Failure) {
        let argv = (["fusermount3"] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawnp(&pid, "fusermount3", nil, nil, argv, environ) == 0 else {
            throw Failure("cannot run fusermount3 (install the fuse3 package)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { throw Failure("fusermount3 \(arguments.joined(separator: " ")) failed") }
    }
}
