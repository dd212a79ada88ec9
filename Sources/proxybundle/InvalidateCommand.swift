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
            every later access through the mount sees the layers as they are on disk. With \
            PATH (relative to the mount's root), only that subtree is refreshed.
            Example:
              proxybundle invalidate /mnt/myapp Images/icons
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Argument(help: "A path relative to the mount's root; everything when left out.")
    var path: String?

    func run() throws {
        let control = Paths.absolute(mountpoint) + "/.invalidate"
        let fd = open(control, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw Failure("\(mountpoint) is not a proxybundle mount (cannot open .invalidate: \(Paths.describe(errno)))")
        }
        defer { close(fd) }
        let line = Array(((path ?? "") + "\n").utf8)
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written < 0 {
            let code = errno
            throw Failure(code == EINVAL ? "'\(path ?? "")' is not a relative path inside the mount"
                                         : "invalidation failed: \(Paths.describe(code))")
        }
    }
}
