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
        let control = Paths.absolute(mountpoint) + "/.invalidate"
        let fd = open(control, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure("\(mountpoint) is not a proxybundle mount (cannot open .invalidate: \(Paths.describe(errno)))")
        }
        defer { close(fd) }
        let line = Array(((all ? "/" : path ?? "") + "\n").utf8)
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written < 0 {
            let code = errno
            throw Failure(code == EINVAL ? "'\(path ?? "")' is not a relative path inside the mount"
                                         : "invalidation failed: \(Paths.describe(code))")
        }
    }
}
