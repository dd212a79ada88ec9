import CSyscalls
import Logging
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// The daemon serves from a fresh image of this program, started with `exec` once `mount`
/// has checked its arguments (same process, same pid). That image never runs the argument
/// parser, whose reflection over the commands leaves about 3 MB of code and metadata
/// resident for the life of a process.
enum DaemonImage {
    /// The first argument of the fresh image; not a command anyone types.
    static let marker = "--serve-checked-mount"
    /// Before each patch's path among the fresh image's arguments.
    static let patchPrefix = "--patch="

    /// The arguments (after the program's name) that start the daemon image serving `plan`
    /// with the `-o` lists `options`, as lossless text (see `RawArguments`): the image gets
    /// the very bytes of each path.
    static func arguments(_ plan: MountPlan, options: [String], level: Logger.Level,
                          destination: LogDestination) -> [String] {
        // the patches as checked (canonical), in place of any the options named; no
        // substitution is an empty argument and the option that says so
        [marker, plan.main.argument, plan.mountpoint.argument, plan.substitution?.argument ?? "", level.rawValue,
         destination.argument] + plan.patches.map { patchPrefix + $0.argument } + options
            + (plan.substitution == nil ? ["nosubstitution"] : [])
    }

    /// `arguments` (lossless text) as the C strings of a new process's `argv`, after the
    /// program's name; the caller frees them.
    static func argv(_ arguments: [String]) -> [UnsafeMutablePointer<CChar>?] {
        (["proxybundle"] + arguments).map { RawArguments.bytes(of: $0).withCStringCopy { strdup($0) } } + [nil]
    }

    /// Replaces this process with the daemon image started with `arguments`. Returns only by
    /// throwing, when the image cannot be started.
    static func exec(_ arguments: [String]) throws(Failure) -> Never {
        let argv = argv(arguments)
        execv("/proc/self/exe", argv)
        let error = errno
        argv.forEach { free($0) }
        throw Failure("cannot start the daemon: \(Paths.describe(error))")
    }

    /// The fresh image: checks the arguments again (nothing has been mounted meanwhile),
    /// serves, and gives the exit status.
    static func serve(_ arguments: [String]) -> Int32 {
        _ = pb_set_process_name("proxybundle")  // started as /proc/self/exe, it would show as "exe"
        do throws(Failure) {
            guard arguments.count >= 5, let level = Logger.Level(rawValue: arguments[3]),
                  let destination = LogDestination(argument: arguments[4]) else {
                throw Failure("\(marker) is for proxybundle mount only")
            }
            let rest = arguments.dropFirst(5)
            let patches = rest.filter { $0.hasPrefix(patchPrefix) }.map { RawPath(argument: String($0.dropFirst(patchPrefix.count))) }
            let options = try MountOptions(rest.filter { !$0.hasPrefix(patchPrefix) })
            let plan = try MountPlan(main: RawPath(argument: arguments[0]), mountpoint: RawPath(argument: arguments[1]),
                                     substitution: arguments[2].isEmpty ? nil : RawPath(argument: arguments[2]),
                                     patches: patches, options: options)
            try destination.bootstrap(level: level)
            // every line names the mount it is about: several share one syslog
            var logger = Logger(label: "proxybundle")
            logger[metadataKey: "mount"] = "\(plan.mountpoint)"
            return try Daemon.serve(plan, logger: logger)
        } catch {
            error.report()
            return 1
        }
    }
}
