import ArgumentParser
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct WhichCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "which",
        abstract: "Tell which layer serves a path of a mount, and its backing path.",
        discussion: """
            Prints one line: `substitution PATH`, `main PATH`, `merged SUBSTITUTION_PATH \
            MAIN_PATH` (a directory in both layers), `hidden by whiteout PATH`, `hidden by \
            opaque directory PATH`, or `control file`; a name in neither layer is an error. \
            The answer is computed from the layers as they are on disk (what the mount shows \
            after an invalidation). A symlink is reported itself, not followed.
            Example:
              proxybundle which /mnt/myapp/en.lproj/Localizable.strings
            """
    )

    @Argument(help: "A path inside a proxybundle mount.")
    var path: String

    func run() throws {
        let absolute = Paths.absolute(path)
        // the directories on the way are resolved as the user sees them; the last name is not
        let slash = absolute.lastIndex(of: "/") ?? absolute.startIndex
        let parent = slash == absolute.startIndex ? "/" : String(absolute[..<slash])
        let name = String(absolute[absolute.index(after: slash)...])
        let directory = Paths.resolved(parent)
        let full = name.isEmpty ? directory : (directory == "/" ? "" : directory) + "/" + name
        guard let mount = RunningMount.containing(full) else {
            throw Failure("\(path) is not inside a proxybundle mount")
        }
        guard mount.isAlive, let substitution = mount.substitution else {
            throw Failure("the daemon of \(mount.mountpoint) does not answer (\(StatusCommand.state(mount)))")
        }
        let relative = String(full.dropFirst(mount.mountpoint == "/" ? 1 : mount.mountpoint.count))
        let overlay: Overlay
        do {
            overlay = try Overlay(main: try WhichCommand.layer(mount.main, of: mount),
                                  substitution: try WhichCommand.layer(substitution, of: mount))
        } catch {
            throw Failure("cannot open the layers of \(mount.mountpoint): \(error)")
        }
        let serving: Serving
        do {
            serving = try overlay.serving(LayerPath(relative))
        } catch {
            throw Failure("\(path) cannot be resolved: \(Paths.describe(error.code))")
        }
        let inMain = WhichCommand.join(mount.main, serving.path)
        let inSubstitution = WhichCommand.join(substitution, serving.path)
        switch serving.source {
        case .substitution: print("substitution \(inSubstitution)")
        case .main: print("main \(inMain)")
        case .merged: print("merged \(inSubstitution) \(inMain)")
        case .whiteout: print("hidden by whiteout \(inSubstitution)")
        case .opaqueDirectory: print("hidden by opaque directory \(inSubstitution)")
        case .control: print("control file")
        case .missing: throw Failure("\(path) is in neither layer")
        }
    }

    static func join(_ root: String, _ path: LayerPath) -> String {
        path.isRoot ? root : (root == "/" ? "" : root) + "/" + path.description
    }

    /// A layer by its path. A mount over the main bundle itself covers that path; then the
    /// daemon's own descriptor of the covered directory is used (found in /proc).
    static func layer(_ path: String, of mount: RunningMount) throws(Errno) -> Layer {
        guard path == mount.mountpoint, let pid = mount.pid else { return try Layer(path: path) }
        var covering = stat()
        guard fstatat(AT_FDCWD, mount.mountpoint, &covering, 0) == 0 else { throw Errno.current }
        let fds = "/proc/\(pid)/fd"
        guard let dir = opendir(fds) else { throw Errno.current }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = String(cString: directoryEntryName(entry))
            guard Int(name) != nil else { continue }
            let link = fds + "/" + name
            var target = [CChar](repeating: 0, count: 4096)
            let length = readlink(link, &target, target.count - 1)
            guard length > 0, String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == path else { continue }
            var st = stat()
            if fstatat(AT_FDCWD, link, &st, 0) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_dev != covering.st_dev {
                return try Layer(path: link)
            }
        }
        throw Errno.noEntry
    }
}
