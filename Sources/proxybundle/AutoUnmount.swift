import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// `-o auto_unmount`: once the daemon has died, its mount is taken away. A watcher does it, a
/// fresh image of this program that the daemon starts once it has mounted (so a foreground
/// daemon, one started by mount(8) or by systemd, gets one too). The watcher holds a pidfd of
/// the daemon and nothing else: no descriptor in the mount (it would keep the mountpoint busy),
/// none of the daemon's (its log, /dev/fuse), its own session (a signal to the daemon's process
/// group misses it), and a command line without `DaemonImage.marker` (it is no daemon).
///
/// When the daemon has exited, the watcher waits until the mount is seen disconnected and
/// detaches it, only if the topmost mount on the mountpoint is still the one the daemon made
/// (the mount ID it recorded after the mount): a mount made over it, or in its place since,
/// is left alone. fusermount3's own `auto_unmount` is not used: its one look at the mount, as
/// soon as the daemon's socket closes, can come before the kernel has dropped the connection
/// (a request in flight then fails with ECONNABORTED, not the ENOTCONN it waits for; over
/// io_uring the kernel drops the connection some milliseconds after the death), and it then
/// left the mount in place for good.
enum AutoUnmount {
    /// The first argument of the watcher image; not a command anyone types.
    static let marker = "--auto-unmount-watch"
    /// The watcher's descriptor of the daemon (a pidfd).
    static let daemonFD: Int32 = 3
    /// How long the watcher waits, after the daemon's death, for the mount to be disconnected.
    /// A connection still up after that is someone else's to serve (they hold /dev/fuse).
    static let patienceMilliseconds = 10_000

    /// In the daemon, once mounted on `mountpoint`: starts the watcher.
    static func watch(_ mountpoint: RawPath) throws(Failure) {
        var id: UInt64 = 0
        // asks the file system nothing: the daemon does not serve yet
        let error = mountpoint.withCString { pb_mount_id(AT_FDCWD, $0, &id) }
        guard error == 0 else { throw Failure("cannot watch \(mountpoint) for auto_unmount: \(Errno(-error).description)") }
        let daemon = pb_pidfd_open(getpid())
        guard daemon >= 0 else { throw Failure("cannot watch \(mountpoint) for auto_unmount: \(Errno(errno).description)") }
        defer { close(daemon) }
        let argv = [Array("proxybundle".utf8), Array(marker.utf8), mountpoint.bytes, Array(String(id).utf8)]
        let started = Spawn.start("/proc/self/exe", argv,
                                  descriptors: [0: .null, 1: .null, 2: .null, daemonFD: .copy(of: daemon)], newSession: true)
        if case .failure(let error) = started {
            throw Failure("cannot start the auto_unmount watcher of \(mountpoint): \(error.description)")
        }
    }

    /// The watcher image: `arguments` are the mountpoint and the mount ID of the daemon's mount.
    static func run(_ arguments: [String]) -> Int32 {
        _ = pb_set_process_name("proxybundle")
        // anything inherited but the pidfd: a log, a descriptor of /dev/fuse
        _ = pb_close_from(daemonFD + 1)
        _ = chdir("/")
        guard arguments.count == 2, let id = UInt64(arguments[1]) else {
            Failure(text: "\(marker) is for proxybundle mount only").report()
            return 2
        }
        let mountpoint = RawPath(argument: arguments[0])
        var daemon = pollfd(fd: daemonFD, events: Int16(POLLIN), revents: 0)
        while poll(&daemon, 1, -1) < 0 {
            guard errno == EINTR else { return 1 }
        }
        close(daemonFD)
        // after a clean unmount the daemon's mount is gone: nothing to do
        guard isTop(id, at: mountpoint), isDisconnected(mountpoint), isTop(id, at: mountpoint) else { return 0 }
        detach(mountpoint, id: id)
        return 0
    }

    /// Whether the topmost mount on `mountpoint` is mount `id`.
    private static func isTop(_ id: UInt64, at mountpoint: RawPath) -> Bool {
        var top: UInt64 = 0
        return mountpoint.withCString { pb_mount_id(AT_FDCWD, $0, &top) } == 0 && top == id
    }

    /// Whether the mount on `mountpoint`, whose daemon has exited, is seen disconnected
    /// (ENOTCONN, or ECONNABORTED for a call the kernel's drop of the connection ended)
    /// within `patienceMilliseconds`. Each look is a call made in a child process with a
    /// deadline (a call waits for as long as the connection is up); one that fails otherwise
    /// (ECANCELED: over io_uring, while the rings are being cancelled) is tried again, after
    /// 1, 2, 4 ... up to 100 ms.
    private static func isDisconnected(_ mountpoint: RawPath) -> Bool {
        let deadline = Daemon.monotonicMilliseconds() + patienceMilliseconds
        var pause = 1
        while true {
            let left = deadline - Daemon.monotonicMilliseconds()
            guard left > 0 else { return false }
            let result = mountpoint.withCString { pb_call_with_deadline(Int32(PB_CALL_STATFS), $0, nil, 0, Int32(left)) }
            switch -Int32(result) {
            case ENOTCONN, ECONNABORTED: return true
            case 0, ETIMEDOUT: return false  // served by someone else, or still up
            default:
                usleep(useconds_t(pause * 1000))
                pause = min(pause * 2, 100)
            }
        }
    }

    /// Takes the mount on `mountpoint` away (the topmost, checked to be the daemon's, `id`).
    private static func detach(_ mountpoint: RawPath, id: UInt64) {
        if getuid() == 0 {
            guard detachAsRoot(mountpoint, id: id) else { return }
        } else {
            guard (try? Unprivileged.fusermount([Array("-u".utf8), Array("-z".utf8), mountpoint.bytes])) != nil else { return }
        }
        pb_syslog(LOG_NOTICE, "auto_unmount: \(mountpoint) detached, its daemon having exited without unmounting")
    }

    /// As root, the mount is taken away by its name in its parent directory, opened without
    /// following a symlink (the mountpoint is canonical, so it has none), and checked there
    /// once more: a user who can rename a directory above the mountpoint cannot turn the path
    /// toward another mount between the check and the detach (as fusermount3 does).
    private static func detachAsRoot(_ mountpoint: RawPath, id: UInt64) -> Bool {
        let bytes = mountpoint.bytes
        guard let slash = bytes.lastIndex(of: 0x2F), slash + 1 < bytes.count else { return false }
        let parent = slash == 0 ? [UInt8(0x2F)] : Array(bytes[..<slash])
        let name = Array(bytes[(slash + 1)...])
        let fd = parent.withCStringCopy { pb_openat2(AT_FDCWD, $0, UInt64(pb_O_PATH | O_DIRECTORY | O_CLOEXEC), 0, pb_RESOLVE_NO_SYMLINKS) }
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard fchdir(fd) == 0 else { return false }
        return name.withCStringCopy { path in
            var top: UInt64 = 0
            return pb_mount_id(AT_FDCWD, path, &top) == 0 && top == id && umount2(path, Int32(MNT_DETACH) | Int32(UMOUNT_NOFOLLOW)) == 0
        }
    }
}
