import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// A proxybundle mount as the system lists it, with what its daemon reports in `.stats`.
struct RunningMount {
    var mountpoint: String
    /// The mount's source (the main bundle unless `fsname=` said otherwise).
    var source: String
    /// `.stats` as `key: value` pairs in order; empty when the daemon does not answer.
    var stats: [(key: String, value: String)]
    /// Why `.stats` could not be read (ENOTCONN: the daemon died), or 0.
    var error: Int32

    func stat(_ key: String) -> String? { stats.first { $0.key == key }?.value }

    var main: String { stat("main") ?? source }
    var substitution: String? { stat("substitution") }
    /// The patches, highest priority first.
    var patches: [String] { stats.filter { $0.key == "patch" }.map(\.value) }
    /// Every layer, top first: its role (`substitution`, `patch`, `main`) and path.
    var layers: [(role: String, path: String)] {
        (substitution.map { [("substitution", $0)] } ?? []) + patches.map { ("patch", $0) } + [("main", main)]
    }
    var pid: pid_t? { stat("pid").flatMap { pid_t($0) } }
    /// Where the daemon logs (`syslog`, `stderr` or a file's path), from the arguments it was
    /// started with; nil when that cannot be read (another user's daemon).
    var log: String? {
        guard let words = daemonArguments, let destination = LogDestination(argument: words[4]) else { return nil }
        switch destination {
        case .syslog: return "syslog"
        case .standardError: return "stderr"
        case .file(let path): return path
        }
    }
    /// The `-o` options the daemon was started with; nil when they cannot be read.
    var startedOptions: MountOptions? {
        guard let words = daemonArguments else { return nil }
        return try? MountOptions(words.dropFirst(5).filter { !$0.hasPrefix(DaemonImage.patchPrefix) })
    }
    /// The daemon image's arguments after its marker (see `DaemonImage.arguments`), at least
    /// five; nil when they cannot be read (another user's daemon).
    private var daemonArguments: [String]? {
        guard let pid, let raw = readText("/proc/\(pid)/cmdline") else { return nil }
        let words = raw.split(separator: "\0", omittingEmptySubsequences: false).map(String.init)
        guard let marker = words.firstIndex(of: DaemonImage.marker) else { return nil }
        var rest = Array(words[(marker + 1)...])
        if rest.last == "" { rest.removeLast() }  // cmdline ends with a NUL
        return rest.count >= 5 ? rest : nil
    }
    var started: Int? { stat("started").flatMap { Int($0) } }
    var isAlive: Bool { error == 0 }

    /// Every proxybundle mount, in mount order.
    static func all() -> [RunningMount] {
        MountTable.current().mounts.filter { $0.type == "fuse.proxybundle" }.map(RunningMount.init)
    }

    /// The proxybundle mount at exactly `path` (absolute, normalised), if any.
    static func at(_ path: String) -> RunningMount? {
        guard let mount = MountTable.current().mount(at: path), mount.type == "fuse.proxybundle" else { return nil }
        return RunningMount(mount)
    }

    /// The innermost proxybundle mount that contains `path` (absolute, normalised).
    static func containing(_ path: String) -> RunningMount? {
        let mounts = MountTable.current().mounts
        // the deepest mountpoint on the path decides, whatever its type
        guard let deepest = mounts.filter({ Paths.isInside(path, $0.mountpoint) })
            .max(by: { $0.mountpoint.count < $1.mountpoint.count }),
              let mount = mounts.last(where: { $0.mountpoint == deepest.mountpoint }),
              mount.type == "fuse.proxybundle" else { return nil }
        return RunningMount(mount)
    }

    init(_ mount: MountTable.Mount) {
        mountpoint = mount.mountpoint
        source = mount.source
        stats = []
        error = 0
        let answer = RunningMount.read(mount.mountpoint + "/.stats", seconds: RunningMount.patience)
        error = answer.error
        guard let text = answer.text else { return }
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = String(line[..<colon])
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            stats.append((key, String(value)))
        }
    }

    /// Why a command cannot use this mount (its `.stats` could not be read), in one line that
    /// says what is true and what to do.
    var unreachable: Failure {
        switch error {
        case ETIMEDOUT:
            return Failure("the daemon of \(mountpoint) does not answer (nothing within \(Int(RunningMount.patience)) s); "
                           + "clear the mount with: proxybundle unmount \(mountpoint)")
        case ENOTCONN, ECONNABORTED:
            return Failure("the daemon of \(mountpoint) has died; clear the mount with: proxybundle unmount \(mountpoint)")
        case EACCES, EPERM:
            return Failure("\(mountpoint) is another user's mount (mounted without allow_other): not yours to use")
        default:
            return Failure("cannot reach the daemon of \(mountpoint): \(Paths.describe(error))")
        }
    }

    /// How long a daemon may take to answer before it counts as hung.
    static let patience = 2.0

    // Each call on the mount is made in a child process (`pb_call_with_deadline`): a thread
    // left waiting on a hung daemon cannot always be ended (over io_uring the kernel waits for
    // the daemon beyond the reach of signals), and it would keep this process from exiting.

    /// A small file's text (up to 1 MiB), or the error; ETIMEDOUT when no answer came within `seconds`.
    static func read(_ path: String, seconds: Double) -> (text: String?, error: Int32) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let result = buffer.withUnsafeMutableBytes {
            pb_call_with_deadline(Int32(PB_CALL_READ), path, $0.baseAddress, $0.count, milliseconds(seconds))
        }
        guard result >= 0 else { return (nil, Int32(-result)) }
        return (String(decoding: buffer[..<Int(result)], as: UTF8.self), 0)
    }

    /// Writes `bytes` to the file at `path` in one write; returns 0, the errno of the failed
    /// open or write, or ETIMEDOUT when no answer came within `seconds`.
    static func write(_ bytes: [UInt8], to path: String, seconds: Double) -> Int32 {
        var copy = bytes
        let result = copy.withUnsafeMutableBytes {
            pb_call_with_deadline(Int32(PB_CALL_WRITE), path, $0.baseAddress, $0.count, milliseconds(seconds))
        }
        return result < 0 ? Int32(-result) : 0
    }

    /// mount_setattr of the mount at `path`: the MOUNT_ATTR_ flags `set` and `clear`; 0, its
    /// errno, or ETIMEDOUT when no answer came within `seconds`.
    static func setAttributes(of path: String, set: UInt64, clear: UInt64, seconds: Double) -> Int32 {
        var change = [set, clear]
        let result = change.withUnsafeMutableBytes {
            pb_call_with_deadline(Int32(PB_CALL_MOUNT_ATTR), path, $0.baseAddress, $0.count, milliseconds(seconds))
        }
        return result < 0 ? Int32(-result) : 0
    }

    /// statfs of `path`: 0, its errno, or ETIMEDOUT when no answer came within `seconds`.
    static func statfs(_ path: String, seconds: Double) -> Int32 {
        let result = pb_call_with_deadline(Int32(PB_CALL_STATFS), path, nil, 0, milliseconds(seconds))
        return result < 0 ? Int32(-result) : 0
    }

    private static func milliseconds(_ seconds: Double) -> Int32 {
        Int32(max(1, min(Double(Int32.max), seconds * 1000)))
    }
}
