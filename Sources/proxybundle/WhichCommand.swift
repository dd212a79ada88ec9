import ArgumentParser
import ProxyBundleCore
import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

struct WhichCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "which",
        abstract: "Tell which layer serves a path of a mount, and its backing path.",
        discussion: """
            Prints one line: the role of the layer that serves the path and the backing path \
            (`substitution PATH`, `patch PATH` or `main PATH`); for a directory in several \
            layers, `merged` and each of them, top first (`merged substitution PATH main \
            PATH`); `hidden by whiteout PATH`, `hidden by opaque directory PATH`, or `control \
            file`; a name in no layer is an error. For each image in a store (see pull) that a \
            patch named is a layer of, a line follows: `image REF DIGEST signed by KEY` (the \
            fingerprint, and the key file of the policy where it names one), or `image REF \
            DIGEST unverified` where the policy accepted it without a signature (one for a file, \
            possibly several for a merged directory, top first). The answer is computed from \
            the layers as they are on disk (what the mount shows after an invalidation). A symlink is \
            reported itself, not followed.
            Example:
              proxybundle which /mnt/myapp/en.lproj/Localizable.strings
            """
    )

    @Argument(help: "A path inside a proxybundle mount.")
    var path: String

    func run() throws {
        // a path is bytes: a name that is not UTF-8 is looked for as it was given
        let given = RawPath(argument: path)
        let absolute = Paths.absolute(given)
        // the directories on the way are resolved as the user sees them; the last name is not
        let directory = Paths.canonical(absolute.parent) ?? absolute.parent
        let full = absolute.lastName.isEmpty ? directory : directory.appending(absolute.lastName)
        guard let mount = RunningMount.containing(full) else {
            throw Failure("\(given) is not inside a proxybundle mount")
        }
        let answer = try WhichCommand.serving(full, in: mount, shownAs: given)
        ByteText(bytes: WhichCommand.words(answer) + [UInt8(ascii: "\n")]).write()
        for image in WhichCommand.images(of: answer, in: mount) {
            print("image \(image.reference) \(image.manifest) \(image.verification)")
        }
    }

    /// The images whose layers the answer's patches are, each once, top first: one for a file,
    /// several for a directory merged from the layers of several images.
    static func images(of answer: Answer, in mount: RunningMount) -> [PatchImage] {
        let patches = answer.places.filter { $0.role == "patch" }.map(\.path)
        guard answer.source != .control, !patches.isEmpty else { return [] }
        let images = PatchImage.of(mount)
        var found: [PatchImage] = []
        for path in patches {
            guard let image = images.first(where: { image in
                image.patches.contains { path.starts(with: $0.bytes + [UInt8(ascii: "/")]) || path == $0.bytes }
            }), !found.contains(where: { $0.reference == image.reference && $0.manifest == image.manifest }) else { continue }
            found.append(image)
        }
        return found
    }

    /// Where a path is served from: why, and each place as its layer's role and the backing
    /// path (bytes, as the file system holds them).
    struct Answer {
        var source: Serving.Source
        var places: [(role: String, path: [UInt8])]
    }

    /// What serves `full` (an absolute path, canonical up to its last name) inside `mount`,
    /// computed from the layers on disk. `shownAs` names the path in errors.
    static func serving(_ full: RawPath, in mount: RunningMount, shownAs path: RawPath) throws -> Answer {
        guard mount.isAlive else { throw mount.unreachable }
        let substitution = mount.substitution
        let relative = Array(full.bytes.dropFirst(mount.mountpoint == .root ? 1 : mount.mountpoint.bytes.count))
        let overlay: Overlay
        let paths = (substitution.map { [$0] } ?? []) + mount.patches + [mount.main]
        do {
            var patches: [Layer] = []
            for patch in mount.patches { patches.append(try WhichCommand.layer(patch, of: mount)) }
            overlay = try Overlay(main: try WhichCommand.layer(mount.main, of: mount), patches: patches,
                                  substitution: try substitution.map { path throws(Errno) in try WhichCommand.layer(path, of: mount) })
        } catch {
            throw Failure("cannot open the layers of \(mount.mountpoint): \(error)")
        }
        let serving: Serving
        do {
            serving = try overlay.serving(Request(overlay), LayerPath(bytes: relative))
        } catch {
            throw Failure("\(path) cannot be resolved: \(Errno(error.code).description)")
        }
        if serving.source == .missing { throw Failure("\(path) is in no layer") }
        // each backing path as its layer spells it, where the mount folds names
        return Answer(source: serving.source, places: serving.places.map { place in
            (role: overlay.currentLayers.role(place.layer).rawValue,
             path: WhichCommand.join(paths[place.layer],
                                     place.isSpelled ? place.path : overlay.currentLayers[place.layer].spelled(place.path)))
        })
    }

    /// The answer in `which`'s words: `ROLE PATH`, `merged ROLE PATH ROLE PATH...`...
    static func words(_ answer: Answer) -> [UInt8] {
        let places = answer.places.map { (role: Array($0.role.utf8), path: $0.path) }
        let words: [[UInt8]]
        switch answer.source {
        case .layer, .missing: words = places.flatMap { [$0.role, $0.path] }
        case .merged: words = [Array("merged".utf8)] + places.flatMap { [$0.role, $0.path] }
        case .whiteout: words = [Array("hidden by whiteout".utf8)] + places.map(\.path)
        case .opaqueDirectory: words = [Array("hidden by opaque directory".utf8)] + places.map(\.path)
        case .control: words = [Array("control file".utf8)]
        }
        return Array(words.joined(separator: [UInt8(ascii: " ")]))
    }

    static func join(_ root: RawPath, _ path: LayerPath) -> [UInt8] {
        path.isRoot ? root.bytes : root.appending(path.bytes).bytes
    }

    /// A layer by its path. A mount over the main bundle itself covers that path; then the
    /// daemon's own descriptor of the covered directory is used (found in /proc). Its names
    /// fold as the mount's do, unless `foldsNames` says otherwise.
    static func layer(_ path: RawPath, of mount: RunningMount, foldsNames: Bool? = nil) throws(Errno) -> Layer {
        let folds = foldsNames ?? mount.foldsNames
        guard path == mount.mountpoint, let pid = mount.pid else { return try Layer(path: path, foldsNames: folds) }
        var covering = stat()
        guard mount.mountpoint.withCString({ fstatat(AT_FDCWD, $0, &covering, 0) }) == 0 else { throw Errno.current }
        let fds = "/proc/\(pid)/fd"
        let dir = open(fds, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard dir >= 0 else { throw Errno.current }
        defer { close(dir) }
        var names: [String] = []
        try? readDirectory(dir) { entry in names.append(String(cString: entry.name)) }
        for name in names {
            guard Int(name) != nil else { continue }
            let link = fds + "/" + name
            var target = [UInt8](repeating: 0, count: 4096)
            let length = readlink(link, &target, target.count - 1)
            guard length > 0, target[..<length].elementsEqual(path.bytes) else { continue }
            var st = stat()
            if fstatat(AT_FDCWD, link, &st, 0) == 0, st.st_mode & S_IFMT == S_IFDIR, st.st_dev != covering.st_dev {
                return try Layer(path: link, foldsNames: folds)
            }
        }
        throw Errno.noEntry
    }
}
