import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// The checked arguments of one mount: absolute paths (bytes, UTF-8 or not) and parsed options.
struct MountPlan {
    var main: RawPath
    var mountpoint: RawPath
    /// None with `--no-substitution`: the mount is read-only and writes nothing anywhere.
    var substitution: RawPath?
    /// The patches, highest priority first.
    var patches: [RawPath]
    var options: MountOptions

    /// `-o ro`, or no substitution: every change answers EROFS.
    var readOnly: Bool { options.readOnly || options.noSubstitution }

    init(main mainArgument: RawPath, mountpoint mountArgument: RawPath, substitution substitutionArgument: RawPath?,
         patches patchArguments: [RawPath] = [], options: MountOptions) throws(Failure) {
        self.options = options
        main = try MountPlan.readableDirectory(mainArgument, role: "main bundle")
        // before anything looks at the path: a mount there may hang whoever does
        try MountPlan.checkNotMounted(Paths.absolute(mountArgument), argument: mountArgument)
        mountpoint = try MountPlan.directory(mountArgument, role: "mountpoint")
        try MountPlan.checkNotMounted(mountpoint, argument: mountArgument)
        var patches: [RawPath] = []
        for argument in patchArguments {
            patches.append(try MountPlan.readableDirectory(argument, role: "patch"))
        }
        self.patches = patches
        if options.noSubstitution {
            // nothing is made or claimed: no default substitution directory, no work area
            substitution = nil
            try MountPlan.checkPatches(zip(patchArguments, patches).map { ($0, $1) }, main: main, mountpoint: mountpoint,
                                       substitution: nil)
            return
        }
        let wanted = substitutionArgument ?? options.substitution ?? Paths.defaultSubstitution(forMain: main)
        try MountPlan.checkNoLoop(main: main, mountpoint: mountpoint, substitution: Paths.resolved(wanted),
                                  argument: wanted)
        try MountPlan.checkPatches(zip(patchArguments, patches).map { ($0, $1) }, main: main, mountpoint: mountpoint,
                                   substitution: Paths.resolved(wanted))
        let kind = Paths.kind(wanted)
        if !kind.exists {
            if kind.error != ENOENT {
                throw Failure("substitution directory \(wanted) cannot be used: \(Errno(kind.error).description)")
            }
            try Paths.makeDirectories(Paths.absolute(wanted))
        }
        let substitution = try MountPlan.directory(wanted, role: "substitution directory")
        self.substitution = substitution
        if !options.readOnly {
            try MountPlan.checkNotOnProxybundle(substitution, argument: wanted)
            try WriterLock.check(substitution)
        }
    }

    /// Each patch must be a layer of its own: not the same directory as another layer, not
    /// inside one nor holding one (`LayerList`), and apart from the mountpoint. A refusal names
    /// the patch by its position, highest priority first, and as given.
    static func checkPatches(_ patches: [(argument: RawPath, path: RawPath)], main: RawPath, mountpoint: RawPath,
                             substitution: RawPath?) throws(Failure) {
        guard patches.count <= LayerList.patchLimit else {
            throw Failure("\(patches.count) patches are more than a mount takes (\(LayerList.patchLimit))")
        }
        // the main bundle, the substitution if any, then the patches
        let fixed = [main] + (substitution.map { [$0] } ?? [])
        func name(_ index: Int) -> ByteText {
            if index == 0 { return "the main bundle \(main)" }
            if index < fixed.count { return "the substitution directory \(fixed[index])" }
            return "patch \(index - fixed.count + 1) (\(patches[index - fixed.count].argument))"
        }
        switch LayerList.problem(fixed + patches.map(\.path)) {
        case .same(let first, let second)?: throw Failure("\(name(second)) is the same directory as \(name(first))")
        case .inside(let inner, let outer)?: throw Failure("\(name(inner)) is inside \(name(outer))")
        case nil: break
        }
        for (index, patch) in patches.enumerated() {
            if patch.path.isInside(mountpoint) {
                throw Failure("\(name(index + fixed.count)) is inside the mountpoint \(mountpoint); the mount would hide it")
            }
            if mountpoint.isInside(patch.path) {
                throw Failure("mountpoint \(mountpoint) is inside \(name(index + fixed.count)); the mount would contain itself")
            }
        }
    }

    /// A substitution directory on a proxybundle mount would take no `.wh.` name (that mount
    /// refuses them), so no deletion and no copy-up could be recorded in it: refused.
    private static func checkNotOnProxybundle(_ substitution: RawPath, argument: RawPath) throws(Failure) {
        guard let holder = MountTable.current().mount(containing: substitution), holder.type == "fuse.proxybundle" else {
            return
        }
        throw Failure("substitution directory \(argument) is on the proxybundle mount at \(holder.mountpoint), which takes "
                      + "no .wh. names: deletions and copy-ups could not be recorded there")
    }

    /// An existing directory the daemon can read, canonical.
    static func readableDirectory(_ argument: RawPath, role: String) throws(Failure) -> RawPath {
        let path = try directory(argument, role: role)
        if path.withCString({ access($0, R_OK | X_OK) }) != 0 {
            throw Failure("\(role) \(argument) cannot be read: \(Errno(errno).description)")
        }
        return path
    }

    /// A mountpoint that is already mounted, the stale mount of a dead daemon (whose
    /// attributes the kernel may still answer from its cache), or the mount of a daemon that
    /// does not answer (asked for at most `RunningMount.patience` seconds) is refused.
    private static func checkNotMounted(_ path: RawPath, argument: RawPath) throws(Failure) {
        guard let existing = MountTable.current().mount(at: path) else { return }
        switch RunningMount.statfs(path, seconds: RunningMount.patience) {
        case ENOTCONN, ECONNABORTED:
            throw Failure("mountpoint \(argument) is a stale mount (Transport endpoint is not connected); run: proxybundle unmount \(argument)")
        case ETIMEDOUT:
            throw Failure("mountpoint \(argument) is the mount of a daemon that does not answer "
                          + "(nothing within \(Int(RunningMount.patience)) s); clear it with: proxybundle unmount \(argument)")
        default:
            throw Failure("mountpoint \(argument) is already a mount point (\(existing.type) from \(existing.source)); unmount it first")
        }
    }

    /// Layouts that make the mount reach into itself (which hangs other union file systems)
    /// are refused. Mounting over the main bundle itself is allowed: the layers are opened
    /// before the mount covers them.
    private static func checkNoLoop(main: RawPath, mountpoint: RawPath, substitution: RawPath,
                                    argument: RawPath) throws(Failure) {
        let inside = { (path: RawPath, ancestor: RawPath) in path.isInside(ancestor) }
        if substitution == main {
            throw Failure("substitution directory \(argument) is the main bundle itself; changes must go elsewhere")
        }
        if inside(substitution, main) {
            throw Failure("substitution directory \(argument) is inside the main bundle \(main), which is never written")
        }
        if inside(main, substitution) {
            throw Failure("main bundle \(main) is inside the substitution directory \(argument)")
        }
        if inside(mountpoint, substitution) {
            throw Failure("mountpoint \(mountpoint) is inside the substitution directory \(argument); the mount would contain itself")
        }
        if inside(substitution, mountpoint) {
            throw Failure("substitution directory \(argument) is inside the mountpoint \(mountpoint); the mount would hide it")
        }
        if mountpoint != main && inside(mountpoint, main) {
            throw Failure("mountpoint \(mountpoint) is inside the main bundle \(main); the mount would contain itself")
        }
    }

    private static func directory(_ argument: RawPath, role: String) throws(Failure) -> RawPath {
        let kind = Paths.kind(argument)
        if !kind.exists {
            if kind.error == ENOTCONN {
                throw Failure("\(role) \(argument) is a stale mount (Transport endpoint is not connected); run: proxybundle unmount \(argument)")
            }
            switch kind.error {
            case ENOENT: throw Failure("\(role) \(argument) does not exist")
            case ENOTDIR: throw Failure("\(role) \(argument) does not exist (a part of its path is not a directory)")
            // a directory on the way that the user cannot search: it may well exist
            default: throw Failure("\(role) \(argument) cannot be reached: \(Errno(kind.error).description)")
            }
        }
        guard kind.isDirectory else { throw Failure("\(role) \(argument) is not a directory") }
        guard let path = Paths.canonical(argument) else {
            throw Failure("\(role) \(argument) cannot be resolved: \(Errno(errno).description)")
        }
        return path
    }
}
