import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// A proxybundle mount as the system lists it, with what its daemon reports in `.stats`.
/// Paths are bytes, as the kernel and `.stats` give them (UTF-8 or not).
struct RunningMount {
    var mountpoint: RawPath
    /// The mount's source (the main bundle unless `fsname=` said otherwise).
    var source: RawPath
    /// `.stats` as `key: value` pairs in order, each value its bytes; empty when the daemon
    /// does not answer.
    var stats: [(key: String, value: [UInt8])]

    /// Whether the mount matches names ignoring case (`-o casefold`), as its `.stats` say.
    var foldsNames: Bool { stats.contains { $0.key == "casefold" && $0.value == Array("on".utf8) } }
    /// Why `.stats` could not be read (ENOTCONN: the daemon died), or 0.
    var error: Int32

    /// A figure of `.stats` as text.
    func stat(_ key: String) -> String? {
        stats.first { $0.key == key }.map { String(decoding: $0.value, as: UTF8.self) }
    }

    /// A path of `.stats` (`main`, `substitution`, `mountpoint`), its bytes as they are.
    func path(_ key: String) -> RawPath? {
        stats.first { $0.key == key }.map { RawPath(bytes: $0.value) }
    }

    var main: RawPath { path("main") ?? source }
    var substitution: RawPath? { path("substitution") }
    /// The patches, highest priority first.
    var patches: [RawPath] { stats.filter { $0.key == "patch" }.map { RawPath(bytes: $0.value) } }
    /// Every layer, top first: its role (`substitution`, `patch`, `main`) and path.
    var layers: [(role: String, path: RawPath)] {
        (substitution.map { [("substitution", $0)] } ?? []) + patches.map { ("patch", $0) } + [("main", main)]
    }
    var pid: pid_t? { stat("pid").flatMap { pid_t($0) } }
    /// Where the daemon logs (`syslog`, `stderr` or a file's path), from the arguments it was
    /// started with; nil when that cannot be read (another user's daemon).
    var log: RawPath? {
        guard let words = daemonArguments, let destination = LogDestination(argument: words[4]) else { return nil }
        switch destination {
        case .syslog: return "syslog"
        case .standardError: return "stderr"
        case .file(let path), .fallback(let path): return path
        }
    }
    /// Whether the daemon logs to a file because syslog was not reachable when it started.
    var logsInPlaceOfSyslog: Bool {
        guard let words = daemonArguments, case .fallback = LogDestination(argument: words[4]) else { return false }
        return true
    }
    /// The `-o` options the daemon was started with; nil when they cannot be read.
    var startedOptions: MountOptions? {
        guard let words = daemonArguments else { return nil }
        return try? MountOptions(words.dropFirst(5).filter { !$0.hasPrefix(DaemonImage.patchesPrefix) })
    }
    /// The daemon image's arguments after its marker (see `DaemonImage.arguments`), at least
    /// five; nil when they cannot be read (another user's daemon).
    private var daemonArguments: [String]? {
        var error: Int32 = 0
        guard let pid, let raw = readBytes(RawPath("/proc/\(pid)/cmdline"), error: &error) else { return nil }
        // each word as lossless text (see RawArguments), so a path that is not UTF-8 survives
        let words = raw.split(separator: 0, omittingEmptySubsequences: false).map { RawArguments.text(of: Array($0)) }
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
    static func at(_ path: RawPath) -> RunningMount? {
        guard let mount = MountTable.current().mount(at: path), mount.type == "fuse.proxybundle" else { return nil }
        return RunningMount(mount)
    }

    /// The innermost proxybundle mount that contains `path` (absolute, normalised).
    static func containing(_ path: RawPath) -> RunningMount? {
        let mounts = MountTable.current().mounts
        // the deepest mountpoint on the path decides, whatever its type
        guard let deepest = mounts.filter({ path.isInside($0.mountpoint) })
            .max(by: { $0.mountpoint.bytes.count < $1.mountpoint.bytes.count }),
              let mount = mounts.last(where: { $0.mountpoint == deepest.mountpoint }),
              mount.type == "fuse.proxybundle" else { return nil }
        return RunningMount(mount)
    }

    init(_ mount: MountTable.Mount) {
        mountpoint = mount.mountpoint
        source = mount.source
        stats = []
        error = 0
        let answer = RunningMount.read(mount.mountpoint.appending(".stats"), seconds: RunningMount.patience)
        error = answer.error
        guard let bytes = answer.bytes else { return }
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let key = String(decoding: line[..<colon], as: UTF8.self)
            let value = line[(colon + 1)...].drop { $0 == UInt8(ascii: " ") }
            stats.append((key, Array(value)))
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

    /// A small file's bytes (up to 1 MiB), or the error; ETIMEDOUT when no answer came within `seconds`.
    static func read(_ path: RawPath, seconds: Double) -> (bytes: [UInt8]?, error: Int32) {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let result = buffer.withUnsafeMutableBytes { area in
            path.withCString { pb_call_with_deadline(Int32(PB_CALL_READ), $0, area.baseAddress, area.count, milliseconds(seconds)) }
        }
        guard result >= 0 else { return (nil, Int32(-result)) }
        return (Array(buffer[..<Int(result)]), 0)
    }

    /// Writes `bytes` to the file at `path` in one write; returns 0, the errno of the failed
    /// open or write, or ETIMEDOUT when no answer came within `seconds`.
    static func write(_ bytes: [UInt8], to path: RawPath, seconds: Double) -> Int32 {
        var copy = bytes
        let result = copy.withUnsafeMutableBytes { area in
            path.withCString { pb_call_with_deadline(Int32(PB_CALL_WRITE), $0, area.baseAddress, area.count, milliseconds(seconds)) }
        }
        return result < 0 ? Int32(-result) : 0
    }

    /// mount_setattr of the mount at `path`: the MOUNT_ATTR_ flags `set` and `clear`; 0, its
    /// errno, or ETIMEDOUT when no answer came within `seconds`.
    static func setAttributes(of path: RawPath, set: UInt64, clear: UInt64, seconds: Double) -> Int32 {
        var change = [set, clear]
        let result = change.withUnsafeMutableBytes { area in
            path.withCString { pb_call_with_deadline(Int32(PB_CALL_MOUNT_ATTR), $0, area.baseAddress, area.count, milliseconds(seconds)) }
        }
        return result < 0 ? Int32(-result) : 0
    }

    /// statfs of `path`: 0, its errno, or ETIMEDOUT when no answer came within `seconds`.
    static func statfs(_ path: RawPath, seconds: Double) -> Int32 {
        let result = path.withCString { pb_call_with_deadline(Int32(PB_CALL_STATFS), $0, nil, 0, milliseconds(seconds)) }
        return result < 0 ? Int32(-result) : 0
    }

    private static func milliseconds(_ seconds: Double) -> Int32 {
        Int32(max(1, min(Double(Int32.max), seconds * 1000)))
    }
}
