import ArgumentParser
import Dispatch
import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

struct LayersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "layers",
        abstract: "Print the layers of a mount, or replace its patches while it is mounted.",
        discussion: """
            Prints one line per layer, top first: `substitution PATH`, `patch PATH` for each \
            patch, `main PATH`. With --set, the patches become DIR... (highest priority first; \
            none: no patches) in one step: when the command returns, every later access through \
            the mount sees the new layers. Files already open keep reading what they opened.
            An updater installs a patch version by unpacking it into a new directory, setting \
            the layers, then removing the old directory.
            --set-image and --rollback switch only to an image the trust policy accepts (see \
            pull): --rollback checks the signatures kept in the store against the policy in \
            force, without the registry; a refusal is one line and changes nothing.
            Example:
              proxybundle layers /mnt/myapp --set /srv/patches/v2 /srv/patches/base
            """
    )

    @Argument(help: "The mountpoint of a proxybundle mount.")
    var mountpoint: String

    @Flag(name: .long, help: "Replace the patches with DIR... (none: no patches).")
    var set = false

    @Argument(help: ArgumentHelp("The new patches, highest priority first (with --set).", valueName: "dir"))
    var directories: [String] = []

    @Option(name: .customLong("patches-from"), help: ArgumentHelp(
        "With --set, more patches, one directory a line, after any DIR (- for standard input).", valueName: "file"))
    var patchesFrom: String?

    @Option(name: .customLong("set-image"), help: ArgumentHelp(
        "Pull the image REF (see pull) and make its layers the patches, top layer first.", valueName: "ref"))
    var setImage: String?

    @Flag(help: "Go back to the image set before the current one (see --history).")
    var rollback = false

    @Flag(help: "List the images set on this mountpoint, oldest first, the current one marked.")
    var history = false

    @OptionGroup var store: StoreOptions

    @OptionGroup var registry: RegistryOptions

    @OptionGroup var limits: ExtractOptions

    func validate() throws {
        if !set && !directories.isEmpty { throw ValidationError("give --set to replace the patches with \(directories[0])") }
        if !set && patchesFrom != nil { throw ValidationError("--patches-from goes with --set") }
        let actions = [set, setImage != nil, rollback, history].filter { $0 }.count
        if actions > 1 { throw ValidationError("give one of --set, --set-image, --rollback and --history") }
    }

    func run() throws {
        let mountpoint = RawPath(argument: self.mountpoint)
        let absolute = Paths.absolute(mountpoint)
        if history { return printHistory(RunningMount.at(absolute)?.mountpoint ?? absolute) }
        guard let mount = RunningMount.at(absolute) else { throw Failure("\(mountpoint) is not a proxybundle mount") }
        guard mount.isAlive else { throw mount.unreachable }
        if set { try replace(mount) }
        if let setImage { try switchTo(setImage, mount) }
        if rollback { try rollBack(mount) }
        let answer = RunningMount.read(absolute.appending(".layers"), seconds: RunningMount.patience)
        guard let bytes = answer.bytes else {
            throw Failure("cannot read the layers of \(mountpoint): \(Paths.describe(answer.error))")
        }
        // the paths as the bytes they are
        ByteText(bytes: bytes).write()
    }

    /// Checks the new patches as `mount` checks its own, then writes them to `.layers`.
    private func replace(_ mount: RunningMount) throws(Failure) {
        let arguments = try directories.map(RawPath.init(argument:)) + (patchesFrom.map { list throws(Failure) in
            try PatchList.read(RawPath(argument: list))
        } ?? [])
        try setPatches(mount, arguments)
    }

    /// Checks `arguments` as `mount` checks its patches, then writes them to `.layers`.
    func setPatches(_ mount: RunningMount, _ arguments: [RawPath]) throws(Failure) {
        guard mount.isAlive else { throw mount.unreachable }
        let substitution = mount.substitution
        // no gc removes a store's layer between its check here and the write (see Store.markInUse)
        let inUse = Store.markInUse(arguments.map { Paths.resolved($0).bytes })
        defer { inUse.forEach { close($0) } }
        var paths: [RawPath] = []
        for argument in arguments { paths.append(try MountPlan.readableDirectory(argument, role: "patch")) }
        try MountPlan.checkPatches(zip(arguments, paths).map { ($0, $1) }, main: mount.main, mountpoint: mount.mountpoint,
                                   substitution: substitution)
        // a write of nothing would not reach the daemon: an empty line stands for no patches
        let text = paths.isEmpty ? [UInt8(ascii: "\n")] : paths.flatMap { $0.bytes + [UInt8(ascii: "\n")] }
        let error = RunningMount.write(text, to: mount.mountpoint.appending(".layers"), seconds: 30)
        switch error {
        case 0: return
        case ETIMEDOUT:
            throw Failure("the daemon of \(mount.mountpoint) did not answer within 30 s; "
                              + "clear the mount with: proxybundle unmount \(mount.mountpoint)")
        default: throw Failure("cannot set the patches of \(mount.mountpoint): \(Paths.describe(error))")
        }
    }
}
