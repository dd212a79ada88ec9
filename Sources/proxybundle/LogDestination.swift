import CSyscalls
import Logging
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the daemon's log lines go: stderr in the foreground, a file (`--log-file`), or
/// syslog (detached without a log file), or a file in its place when syslog is not reachable.
enum LogDestination {
    case standardError
    case file(RawPath)
    case syslog
    /// The file a detached daemon logs to because syslog is not reachable; its first line
    /// says so, and `status` too (never the mount's stderr, which scripts read).
    case fallback(RawPath)

    /// As passed to the daemon image: `stderr`, `syslog`, `file:PATH` or `fallback:PATH`
    /// (lossless text, see `RawArguments`).
    var argument: String {
        switch self {
        case .standardError: "stderr"
        case .syslog: "syslog"
        case .file(let path): "file:" + path.argument
        case .fallback(let path): "fallback:" + path.argument
        }
    }

    init?(argument: String) {
        switch argument {
        case "stderr": self = .standardError
        case "syslog": self = .syslog
        default:
            if argument.hasPrefix("file:") {
                self = .file(RawPath(argument: String(argument.dropFirst(5))))
            } else if argument.hasPrefix("fallback:") {
                self = .fallback(RawPath(argument: String(argument.dropFirst(9))))
            } else {
                return nil
            }
        }
    }

    /// Why syslog cannot take the log, as the fallback file's first line and `status` say.
    static func unreachableText(_ reason: Int32) -> String {
        "syslog is not reachable (/dev/log: \(Errno(reason).description))"
    }

    /// 0 when a syslog daemon listens on /dev/log (a datagram can be sent there), else why not.
    static func syslogUnreachable() -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in "/dev/log".utf8.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        return connected == 0 ? 0 : errno
    }

    /// Where a mount's log goes when syslog cannot take it:
    /// `${XDG_STATE_HOME:-$HOME/.local/state}/proxybundle/<mountpoint's name>-<hash>.log`.
    static func fallbackFile(forMountpoint mountpoint: RawPath) -> RawPath {
        var state = Paths.home().appending(".local/state")
        if let xdg = getenv("XDG_STATE_HOME"), xdg.pointee == UInt8(ascii: "/") { state = RawPath(cString: xdg) }
        let name = mountpoint.lastName.isEmpty ? Array("root".utf8) : mountpoint.lastName
        return state.appending("proxybundle").appending(name + Array("-\(Paths.shortHash(mountpoint)).log".utf8))
    }

    /// Syslog when it is reachable; otherwise the fallback file, which says so in its first
    /// line (as `status` does), so that the mount's stderr stays quiet (a mount in a script or
    /// test suite prints nothing). Only when the log can go nowhere at all is that said on
    /// stderr when the mount is up.
    static func syslogOrFallback(mountpoint: RawPath) -> (LogDestination, notice: Failure?) {
        let reason = syslogUnreachable()
        guard reason != 0 else { return (.syslog, nil) }
        let unreachable = unreachableText(reason)
        let file = fallbackFile(forMountpoint: mountpoint)
        do throws(Failure) {
            try Paths.makeDirectories(file.parent, role: "log directory")
            try checkWritable(file)
        } catch {
            // the mount is not refused for want of a log: it logs nowhere, and says so
            return (.file("/dev/null"), Failure("\(unreachable) and \(error.line): the daemon logs nothing "
                                                + "(give --log-file)"))
        }
        return (.fallback(file), nil)
    }

    /// Checks that a log file can be written before anything is mounted.
    static func checkWritable(_ path: RawPath) throws(Failure) {
        let fd = path.withCString { open($0, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw Failure("log file \(path) cannot be written: \(Errno(errno).description)") }
        close(fd)
    }

    /// Makes every logger write here, at `level` and above.
    func bootstrap(level: Logger.Level) throws(Failure) {
        switch self {
        case .standardError:
            let sink: LineLogHandler.Sink = LogDestination.standardErrorIsJournal() ? .journal(2) : .file(2)
            LoggingSystem.bootstrap { label in LineLogHandler(level: level, label: label, sink: sink) }
        case .file(let path), .fallback(let path):
            let fd = path.withCString { open($0, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644) }
            guard fd >= 0 else { throw Failure("log file \(path) cannot be written: \(Errno(errno).description)") }
            LoggingSystem.bootstrap { label in LineLogHandler(level: level, label: label, sink: .file(fd)) }
            if case .fallback = self {
                let reason = LogDestination.unreachableText(LogDestination.syslogUnreachable())
                Logger(label: "proxybundle").warning("\(reason); this mount logs here")
            }
        case .syslog:
            // openlog keeps the pointer, so the name must outlive this call: never freed
            openlog(strdup("proxybundle"), LOG_PID, LOG_DAEMON)
            LoggingSystem.bootstrap { label in LineLogHandler(level: level, label: label, sink: .syslog) }
        }
    }

    /// Whether standard error is systemd's journal stream: `$JOURNAL_STREAM` names its
    /// device and inode (`DEV:INO`), which a redirection in between would change.
    static func standardErrorIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        var st = stat()
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]), fstat(2, &st) == 0 else { return false }
        return UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
    }
}

/// One line per message, naming the mount it is about (the logger's `mount` metadata) and
/// errors by their errno names (`ENOTEMPTY`, see `Errno.name`):
/// - to a file or a terminal, `2026-11-21T10:04:05 warning /mnt/app: rmdir /d failed: EIO`,
///   one write per line, so lines of concurrent requests never interleave;
/// - to the journal's stream (`$JOURNAL_STREAM`), `<4>/mnt/app: ...`: the level as the
///   journal's priority prefix, and no time (the journal keeps its own);
/// - to syslog, `/mnt/app: ...` with the level as the priority.
struct LineLogHandler: LogHandler {
    enum Sink { case file(Int32), journal(Int32), syslog }

    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    let label: String
    let sink: Sink

    init(level: Logger.Level, label: String, sink: Sink) {
        logLevel = level
        self.label = label
        self.sink = sink
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let level = event.level
        var all = metadata.merging(event.metadata ?? [:]) { $1 }
        let subject = all.removeValue(forKey: "mount").map { "\($0): " } ?? ""
        let details = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = "\(subject)\(event.message)\(details)".split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " ")
        switch sink {
        case .file(let fd):
            LineLogHandler.write("\(LineLogHandler.timestamp()) \(level) \(text)\n", to: fd)
        case .journal(let fd):
            LineLogHandler.write("<\(LineLogHandler.priority(level))>\(text)\n", to: fd)
        case .syslog:
            pb_syslog(LineLogHandler.priority(level), text)
        }
    }

    private static func write(_ entry: String, to fd: Int32) {
        _ = entry.withCString { Glibc.write(fd, $0, strlen($0)) }
    }

    static func priority(_ level: Logger.Level) -> Int32 {
        switch level {
        case .trace, .debug: LOG_DEBUG
        case .info: LOG_INFO
        case .notice: LOG_NOTICE
        case .warning: LOG_WARNING
        case .error: LOG_ERR
        case .critical: LOG_CRIT
        }
    }

    /// Local time as `2026-11-21T10:04:05`.
    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
