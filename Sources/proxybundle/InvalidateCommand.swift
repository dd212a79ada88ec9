import ArgumentParser
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct InvalidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invalidate",
        abstract: "Make changes made directly in the layers visible through a mount.",
        discussion: """
            Writes PATH (or an empty line) to MOUNTPOINT/.invalidate: when this command returns, \
            every later access through the mount sees the layers as they are on disk. Without \
            PATH, what changed is forgotten (as inotify saw it); with PATH (relative to the \
            mount's root), all of that subtree; with --all, all of it, changed or not (for \
            changes inotify cannot see: writes through mmap, or through a hard link elsewhere).
            Example:
              proxybundle invalidate /mnt/myapp Images/icons
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Argument(help: "A path relative to the mount's root; whatever changed when left out.")
    var path: String?

    @Flag(name: .long, help: "Forget everything cached, changed or not.")
    var all = false

    func validate() throws {
        if all && path != nil { throw ValidationError("give a PATH or --all, not both") }
    }

    func run() throws {
        let mountpoint = RawPath(argument: self.mountpoint)
        let absolute = Paths.absolute(mountpoint)
        guard let mount = RunningMount.at(absolute) else {
            if let other = MountTable.current().mount(at: absolute) {
                throw Failure("\(mountpoint) is a \(other.type) mount, not a proxybundle mount")
            }
            throw Failure("\(mountpoint) is not a proxybundle mount (nothing is mounted there)")
        }
        guard mount.isAlive else { throw mount.unreachable }
        // a path is bytes: a name that is not UTF-8 is invalidated as it was given
        let line = (all ? [UInt8(ascii: "/")] : path.map(RawArguments.bytes) ?? []) + [UInt8(ascii: "\n")]
        let error = RunningMount.write(line, to: absolute.appending(".invalidate"), seconds: InvalidateCommand.patience)
        switch error {
        case 0: return
        case EINVAL: throw Failure("'\(RawPath(argument: path ?? ""))' is not a relative path inside the mount")
        case ETIMEDOUT:
            throw Failure("the daemon of \(mountpoint) did not finish the invalidation within \(Int(InvalidateCommand.patience)) s; "
                          + "if it does not answer, clear the mount with: proxybundle unmount \(mountpoint)")
        default: throw Failure("invalidation failed: \(Errno(error).description)")
        }
    }

    /// How long an invalidation may take (flushing a million cached names takes about 5 s).
    static let patience = 60.0
}
