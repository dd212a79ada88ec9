#if canImport(Glibc)
import Glibc
#endif

/// A status line on a terminal: rewritten in place (carriage return, erase to the end of the
/// line) at most every `interval` seconds, then ended with a newline when the step is done.
/// Silent when not `enabled` (standard error is not a terminal): no line at all.
public final class Progress {
    public let enabled: Bool
    private let fd: Int32
    private let interval: Double
    private var lastShown = 0.0
    private var lineShown = false

    public init(fd: Int32 = 2, enabled: Bool, interval: Double = 0.1) {
        self.fd = fd
        self.enabled = enabled
        self.interval = interval
    }

    /// Enabled when `fd` is a terminal.
    public static func terminal(_ fd: Int32 = 2) -> Progress { Progress(fd: fd, enabled: isatty(fd) != 0) }

    /// Whether an update is due (enabled, and `interval` passed since the last one): lets a
    /// caller skip gathering figures that would not be shown.
    public var isDue: Bool { enabled && Progress.now() - lastShown >= interval }

    /// Shows `text` in place of the current status line, unless one was shown less than
    /// `interval` ago (`force`: show anyway, as a step's first line).
    public func update(_ text: @autoclosure () -> String, force: Bool = false) {
        guard enabled, force || isDue else { return }
        put("\r\u{1B}[K" + text())
        lineShown = true
        lastShown = Progress.now()
    }

    /// Replaces the status line with `text` and ends the line: what the step came to.
    public func finish(_ text: String) {
        guard enabled else { return }
        put("\r\u{1B}[K" + text + "\n")
        lineShown = false
    }

    /// Erases a status line left showing (before an error line, or another program's output).
    public func clear() {
        guard enabled, lineShown else { return }
        put("\r\u{1B}[K")
        lineShown = false
    }

    private func put(_ text: String) {
        var bytes = Array(text.utf8)
        var at = 0
        while at < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + at, $0.count - at) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            at += n
        }
    }

    /// `bytes` for a person: 812 B, 3.4 MB, 1.2 GB (decimal units).
    public static func size(_ bytes: UInt64) -> String {
        let value = Double(bytes)
        if value < 1000 { return "\(bytes) B" }
        let units = ["kB", "MB", "GB", "TB"]
        var scaled = value / 1000, unit = 0
        while scaled >= 1000 && unit < units.count - 1 { scaled /= 1000; unit += 1 }
        return tenths(scaled) + " " + units[unit]
    }

    /// A rate: `bytes` over `seconds`, as 85.3 MB/s.
    public static func rate(_ bytes: UInt64, _ seconds: Double) -> String {
        size(UInt64(Double(bytes) / max(seconds, 0.001))) + "/s"
    }

    private static func tenths(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    public static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
