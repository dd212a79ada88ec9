import ArgumentParser
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct RemountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remount",
        abstract: "Change a running mount's options: read-only or writable, the cache timeouts.",
        discussion: """
            -o takes ro (every change answers EROFS: the kernel's flag of the mount and the \
            daemon's own state; a file open for writing makes the mount busy, as on any file \
            system), rw, entry_timeout=, attr_timeout=, negative_timeout= (seconds; what the kernel \
            cached under the old timeouts is forgotten) and nosuid, nodev, noexec (suid, dev, \
            exec). Other mount options cannot change on a live mount and are refused by name \
            unless the mount already has them. Also through mount(8): mount -o remount,ro MOUNTPOINT.
            Examples:
              proxybundle remount /mnt/app -o ro
              proxybundle remount /mnt/app -o rw,entry_timeout=5
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Option(name: .short, help: ArgumentHelp("Comma-separated options to change (ro, rw, entry_timeout=, ...); required.",
                                             valueName: "options"),
            completion: .list(RemountCommand.completions))
    var options: [String]

    /// What `-o` completes to: the options a remount may change.
    static let completions = ["ro", "rw", "entry_timeout=", "attr_timeout=", "negative_timeout=",
                              "nosuid", "suid", "nodev", "dev", "noexec", "exec"]

    func run() throws {
        try Remount.run(mountpoint: mountpoint, options: options, helper: false)
    }
}

/// A remount: the options checked against the mount, then told to the daemon (`.remount`,
/// reached through a writable clone of the mount when it is read-only), then the kernel's
/// flags of the mount set; a refusal of the flags puts the daemon's state back.
enum Remount {
    static func run(mountpoint: String, options: [String], helper: Bool) throws(Failure) {
        let absolute = Paths.absolute(RawPath(argument: mountpoint))
        guard let table = MountTable.current().mount(at: absolute) else {
            throw Failure("\(mountpoint) is not a proxybundle mount (nothing is mounted there)")
        }
        guard table.type == "fuse.proxybundle" else {
            throw Failure("\(mountpoint) is a \(table.type) mount, not a proxybundle mount")
        }
        let mount = RunningMount(table)
        guard mount.isAlive else { throw mount.unreachable }
        guard let state = mount.stat("read_only") else {
            throw Failure("the daemon of \(mountpoint) (version \(mount.stat("version") ?? "unknown")) cannot be remounted; "
                          + "unmount and mount again")
        }
        let present = RemountOptions.Present(mount: mount, table: table, started: mount.startedOptions)
        let change = try RemountOptions(options, present: present, helper: helper)
        if change.readOnly == false && mount.substitution == nil {
            throw Failure("\(mountpoint) has no substitution directory (mounted with --no-substitution): "
                          + "it stays read-only; nothing changed")
        }
        if helper && state == "yes" && !present.kernelReadOnly && change.readOnly == nil {
            Failure("note: \(mountpoint) stays read-only (mounted with -o ro); to make it writable: "
                    + "proxybundle remount \(mountpoint) -o rw").report()
        }
        let text = change.daemonText
        if !text.isEmpty { try tell(text, mount) }
        guard change.setFlags | change.clearFlags != 0 else { return }
        let error = RunningMount.setAttributes(of: absolute, set: change.setFlags, clear: change.clearFlags,
                                               seconds: RunningMount.patience)
        guard error != 0 else { return }
        if change.readOnly != nil { try? tell(state == "yes" ? "ro" : "rw", mount) }
        switch error {
        case EBUSY:
            throw Failure("\(mountpoint) is busy: a file on it is open for writing (close it first, as on any file system)")
        case EPERM:
            throw Failure("changing the flags of \(mountpoint) needs root (CAP_SYS_ADMIN); nothing changed")
        case ETIMEDOUT:
            throw mount.unreachable
        default:
            throw Failure("cannot change the flags of \(mountpoint): \(Errno(error).description); nothing changed")
        }
    }

    /// Writes `text` to the mount's `.remount`.
    private static func tell(_ text: String, _ mount: RunningMount) throws(Failure) {
        let mountpoint = mount.mountpoint
        let error = RunningMount.write(Array((text + "\n").utf8), to: mountpoint.appending(".remount"),
                                       seconds: InvalidateCommand.patience)
        switch error {
        case 0: return
        case EBUSY:
            throw Failure("cannot make \(mountpoint) writable: "
                          + WriterLock.heldMessage(mount.substitution ?? RawPath(""), excluding: mountpoint))
        case EROFS:
            throw Failure("\(mountpoint) is read-only by its mount flag; changing it needs root (CAP_SYS_ADMIN)")
        case ENOENT:
            throw Failure("the daemon of \(mountpoint) cannot be remounted; unmount and mount again")
        case EINVAL:
            throw Failure("the daemon of \(mountpoint) refused '\(text)'")
        case ETIMEDOUT:
            throw Failure("the daemon of \(mountpoint) did not answer within \(Int(InvalidateCommand.patience)) s; "
                          + "if it does not answer, clear the mount with: proxybundle unmount \(mountpoint)")
        default:
            throw Failure("cannot remount \(mountpoint): \(Errno(error).description)")
        }
    }
}
