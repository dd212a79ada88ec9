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
    /// The argument naming the descriptor the image reads its patches from (see `PatchList`).
    static let patchesPrefix = "--patches-fd="

    /// The arguments (after the program's name) that start the daemon image serving `plan`,
    /// as lossless text (see `RawArguments`): the image gets the very bytes of each path. The
    /// patches are not among them but in the file open as `patchesFD` in the image (see
    /// `PatchList`), so `ps` and `/proc/PID/cmdline` show a short line whatever their number;
    /// the options are the words `mount` parsed, in one argument.
    static func arguments(_ plan: MountPlan, level: Logger.Level, destination: LogDestination,
                          patchesFD: Int32?) -> [String] {
        let words = plan.options.daemonWords
        return [marker, plan.main.argument, plan.mountpoint.argument, plan.substitution?.argument ?? "", level.rawValue,
                destination.argument] + (patchesFD.map { ["\(patchesPrefix)\($0)"] } ?? [])
            + (words.isEmpty ? [] : [words.joined(separator: ",")])
    }

    /// The checked patches, handed to the daemon image in an anonymous file (`memfd`) rather
    /// than on its command line: each path's bytes followed by a NUL. The image reads it once
    /// at start and closes it. At 1,000 patches the command line was 70 KB, every path in it.
    struct PatchList {
        /// Closed on exec: a spawned image gets a copy at `Daemon.childPatchesFD`, and
        /// `inheritable` lets the image exec'd in this process keep it.
        let fd: Int32

        /// nil when there are no patches (no file, no argument).
        init?(_ patches: [RawPath]) throws(Failure) {
            guard !patches.isEmpty else { return nil }
            fd = pb_memfd_create("proxybundle-patches")
            guard fd >= 0 else { throw Failure("cannot hand the patches to the daemon: \(Errno(errno).description)") }
            var bytes: [UInt8] = []
            for patch in patches { bytes += patch.bytes + [0] }
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(written)) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { throw Failure("cannot hand the patches to the daemon: \(Errno(errno).description)") }
                written += count
            }
        }

        /// `fd`, kept open across an exec of this process.
        var inheritable: Int32 {
            _ = fcntl(fd, F_SETFD, 0)
            return fd
        }

        /// The patches in the file open as `fd`, which is closed.
        static func read(_ fd: Int32) throws(Failure) -> [RawPath] {
            defer { close(fd) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = Glibc.read(fd, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count < 0 { throw Failure("cannot read the patches handed to the daemon: \(Errno(errno).description)") }
                if count == 0 { break }
                bytes += chunk[..<count]
            }
            return bytes.split(separator: 0).map { RawPath(bytes: Array($0)) }
        }
    }

    /// `arguments` (lossless text) as the C strings of a new process's `argv`, after the
    /// program's name; the caller frees them.
    static func argv(_ arguments: [String]) -> [UnsafeMutablePointer<CChar>?] {
        argumentBytes(arguments).map { $0.withCStringCopy { strdup($0) } } + [nil]
    }

    /// The daemon image's argv (its name first) as the bytes the user gave.
    static func argumentBytes(_ arguments: [String]) -> [[UInt8]] {
        (["proxybundle"] + arguments).map(RawArguments.bytes(of:))
    }

    /// Replaces this process with the daemon image started with `arguments`. Returns only by
    /// throwing, when the image cannot be started.
    static func exec(_ arguments: [String]) throws(Failure) -> Never {
        let argv = argv(arguments)
        execv("/proc/self/exe", argv)
        let error = errno
        argv.forEach { free($0) }
        throw Failure("cannot start the daemon: \(Errno(error).description)")
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
            var rest = Array(arguments.dropFirst(5))
            var patches: [RawPath] = []
            if let first = rest.first, first.hasPrefix(patchesPrefix) {
                guard let fd = Int32(first.dropFirst(patchesPrefix.count)) else { throw Failure("\(marker) is for proxybundle mount only") }
                patches = try PatchList.read(fd)
                rest.removeFirst()
            }
            let options = try MountOptions(rest)
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
