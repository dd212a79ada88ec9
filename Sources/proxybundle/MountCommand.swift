import ArgumentParser
import Logging
#if canImport(Glibc)
import Glibc
#endif

struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount the merged view of MAIN shadowed by a substitution directory on MOUNTPOINT.",
        discussion: """
            A name in the substitution directory wins over the same name in MAIN; directory \
            listings are merged. In the substitution, `.wh.NAME` hides NAME of MAIN and \
            `.wh..wh..opq` hides all of MAIN's entries of its directory. MAIN is never modified.

            Without --foreground the command returns once the mount answers and the daemon \
            keeps running detached.

            Example:
              proxybundle mount /opt/MyApp/Resources /mnt/myapp --substitution /var/cache/myapp/patch
              proxybundle mount App.bundle /mnt/app -o entry_timeout=5,allow_other
            """
    )

    @Argument(help: "The main bundle directory (only ever read).")
    var main: String

    @Argument(help: "The directory on which to show the merged view.")
    var mountpoint: String

    @Option(name: .long, help: ArgumentHelp(
        "The writable substitution directory; created if missing.",
        discussion: "Default: ${XDG_CACHE_HOME:-$HOME/.cache}/proxybundle/<basename of MAIN>/patch",
        valueName: "dir"))
    var substitution: String?

    @Flag(name: .long, help: "Stay attached and log to stderr instead of running detached.")
    var foreground = false

    @Option(name: .short, help: ArgumentHelp(MountOptions.help, valueName: "options"))
    var options: [String] = []

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical. At debug, one line per failed request; a request that fails with EIO is always a warning.")
    var logLevel: Logger.Level = .info

    @Option(name: .long, help: ArgumentHelp("Append the log to this file (default: stderr in the foreground, syslog when detached).", valueName: "file"))
    var logFile: String?

    @Flag(name: .long, help: "Log to syslog (the default when detached without --log-file).")
    var syslog = false

    func run() throws {
        let parsed = try MountOptions(options)
        let plan = try MountPlan(main: main, mountpoint: mountpoint, substitution: substitution, options: parsed)
        let logFile = logFile.map(Paths.absolute)
        if let logFile { try LogDestination.checkWritable(logFile) }
        let destination: LogDestination = logFile.map { .file($0) } ?? (syslog || !foreground ? .syslog : .standardError)
        let daemon = DaemonImage.arguments(plan, options: options, level: logLevel, destination: destination)
        if foreground { try DaemonImage.exec(daemon) }
        try Daemon.startDetached(daemon, mountpoint: plan.mountpoint)
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
