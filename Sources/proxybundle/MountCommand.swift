import ArgumentParser
import Logging
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount the merged view of MAIN under any patches under a substitution directory on MOUNTPOINT.",
        discussion: """
            The layers, top first: the substitution directory (written), each --patch in the \
            order given (the first wins), MAIN. A name in a layer wins over the same name in \
            every layer below; directory listings are merged. In a layer, `.wh.NAME` hides NAME \
            of the layers below and `.wh..wh..opq` hides all of their entries of its directory. \
            MAIN and the patches are never modified. Up to \(LayerList.patchLimit) patches: \
            --patches-from (or -o patches-from=) takes a list of them, one directory a line.

            Without --foreground the command returns once the mount answers and the daemon \
            keeps running detached.

            Examples:
              proxybundle mount /srv/app /mnt/app --substitution /var/cache/app/patch
              proxybundle mount /srv/app /mnt/app --patch /srv/fix --patch /srv/base
              proxybundle mount App.bundle /mnt/app -o entry_timeout=5,allow_other
            """
    )

    @Argument(help: "The main bundle directory (only ever read).")
    var main: String

    @Argument(help: "The directory on which to show the merged view.")
    var mountpoint: String

    @Option(name: .long, help: ArgumentHelp(
        "The writable substitution directory; created if missing.",
        discussion: "Default: ${XDG_CACHE_HOME:-$HOME/.cache}/proxybundle/<basename of MAIN>-<hash of its path>/patch. One writable mount per substitution directory at a time.",
        valueName: "dir"))
    var substitution: String?

    @Flag(name: .customLong("no-substitution"), help: ArgumentHelp(
        "Mount MAIN under its patches with no writable layer: read-only, writing nothing anywhere.",
        discussion: "No substitution directory is made or used and no work area; a remount to read-write is refused."))
    var noSubstitution = false

    @Option(name: .long, help: ArgumentHelp(
        "A read-only patch layer between the substitution and MAIN; repeat for more, highest priority first.",
        valueName: "dir"))
    var patch: [String] = []

    @Option(name: .customLong("patches-from"), help: ArgumentHelp(
        "More patches, one directory a line, after any --patch (- for standard input); up to \(LayerList.patchLimit) patches in all.",
        valueName: "file"))
    var patchesFrom: String?

    @Flag(name: .long, help: ArgumentHelp(
        "Match names ignoring letter case and Unicode normalization, as ext4's and tmpfs's casefold do.",
        discussion: "For content written on macOS or Windows: Textures/Rock.DDS finds textures/rock.dds, and directories whose names differ only in case merge across layers. Names are kept as written; a listing shows the spelling of the highest layer that has the name. A name that is not valid UTF-8 matches byte for byte."))
    var casefold = false

    @Flag(name: .long, help: "Stay attached and log to stderr instead of running detached.")
    var foreground = false

    @Option(name: .short, help: ArgumentHelp(MountOptions.help, valueName: "options"), completion: .list(MountOptions.completions))
    var options: [String] = []

    @Option(name: .long, help: "Log level: trace, debug, info (the default), notice, warning, error, critical. At debug, one line per failed request; a request that fails with EIO is always a warning.")
    var logLevel: Logger.Level?

    @Option(name: .long, help: ArgumentHelp("Append the log to this file (default: stderr in the foreground, syslog when detached).", valueName: "file"))
    var logFile: String?

    @Flag(name: .long, help: "Log to syslog (the default when detached without --log-file).")
    var syslog = false

    /// The flags that set a mount option, each with the `-o` word it stands for: `run` parses
    /// the `-o` options with these words added, and the daemon image is started with those
    /// words (`MountOptions.daemonWords`), so a flag cannot be checked here and lost there. The
    /// flags that name layers or the log (`--substitution`, `--patch`, `--patches-from`,
    /// `--log-level`, `--log-file`, `--syslog`, `--foreground`) reach the plan or the image's
    /// own arguments instead; `MountFlagTests` mounts with every flag of this command.
    static var optionFlags: [(flag: String, word: String, isSet: (MountCommand) -> Bool)] { [
        ("--casefold", "casefold", { $0.casefold }),
        ("--no-substitution", "nosubstitution", { $0.noSubstitution }),
    ] }

    /// The `-o` lists given, then the words of the flags given.
    var optionWords: [String] {
        options + MountCommand.optionFlags.filter { $0.isSet(self) }.map(\.word)
    }

    func validate() throws {
        if logFile != nil && syslog { throw ValidationError("give --log-file or --syslog, not both") }
    }

    func run() throws {
        if options.contains(where: { $0.split(separator: ",").contains("remount") }) {
            // mount(8)'s `-o remount` through the helper convention
            let given = (substitution.map { ["substitution=\($0)"] } ?? [])
                + (patch.isEmpty ? [] : ["patches=" + patch.map(MountOptions.escapedPatch).joined(separator: ":")])
            return try Remount.run(mountpoint: mountpoint, options: options + given, helper: true)
        }
        // every path is the bytes given (UTF-8 or not: see RawArguments)
        let parsed = try MountOptions(optionWords)
        let substitution = substitution.map(RawPath.init(argument:))
        if parsed.noSubstitution, let given = substitution ?? parsed.substitution {
            throw Failure("--no-substitution and a substitution directory (\(given)) disagree; give one")
        }
        if let substitution, let option = parsed.substitution, Paths.absolute(substitution) != Paths.absolute(option) {
            throw Failure("--substitution \(substitution) and -o substitution=\(option) disagree; give one")
        }
        var patches = patch.map(RawPath.init(argument:)) + parsed.patches
        for list in [patchesFrom.map(RawPath.init(argument:)), parsed.patchesFrom].compactMap({ $0 }) {
            patches += try PatchList.read(list)
        }
        if let image = parsed.image {
            patches += try MountImage.patches(image, store: parsed.store, mountpoint: RawPath(argument: mountpoint))
        }
        let plan = try MountPlan(main: RawPath(argument: main), mountpoint: RawPath(argument: mountpoint),
                                 substitution: substitution, patches: patches, options: parsed)
        if let logLevel, let option = parsed.logLevel, logLevel != option {
            throw Failure("--log-level \(logLevel.rawValue) and -o \(parsed.debug ? "debug" : "log_level=" + option.rawValue) disagree; give one")
        }
        let level = logLevel ?? parsed.logLevel ?? .info
        let foreground = foreground || parsed.debug
        let logFile = logFile.map { Paths.absolute(RawPath(argument: $0)) }
        if let logFile { try LogDestination.checkWritable(logFile) }
        var destination: LogDestination = logFile.map { .file($0) } ?? .standardError
        var notice: Failure? = nil
        if logFile == nil && (syslog || !foreground) {
            (destination, notice) = LogDestination.syslogOrFallback(mountpoint: plan.mountpoint)
        }
        let patchList = try DaemonImage.PatchList(plan.patches)
        if plan.mountpoint != plan.main, let count = Paths.entryCount(plan.mountpoint), count > 0 {
            Failure("warning: mountpoint \(plan.mountpoint) is not empty: its \(count) "
                    + "\(count == 1 ? "entry is" : "entries are") hidden while it is mounted").report()
        }
        if foreground {
            notice?.report()
            try DaemonImage.exec(DaemonImage.arguments(plan, level: level, destination: destination,
                                                       patchesFD: patchList?.inheritable))
        }
        try Daemon.startDetached(DaemonImage.arguments(plan, level: level, destination: destination,
                                                       patchesFD: patchList.map { _ in Daemon.childPatchesFD }),
                                 patches: patchList, mountpoint: plan.mountpoint)
        notice?.report()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
