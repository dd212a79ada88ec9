import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "List proxybundle mounts: layers, daemon pid, uptime and cache figures.",
        discussion: """
            A mount whose daemon has died is listed as "not connected"; clear it with \
            proxybundle unmount. With --json, one array of objects, for scripts.
            Example:
              proxybundle status
              proxybundle status /mnt/myapp --json
            """
    )

    @Argument(help: "Only this mountpoint (it must be a proxybundle mount).")
    var mountpoint: String?

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        var mounts = RunningMount.all()
        if let mountpoint {
            guard let mount = RunningMount.at(Paths.absolute(mountpoint)) else {
                throw Failure("\(mountpoint) is not a proxybundle mount")
            }
            mounts = [mount]
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let text = json ? StatusCommand.json(mounts, now: now.tv_sec) : StatusCommand.text(mounts, now: now.tv_sec)
        print(text)
    }

    static func state(_ mount: RunningMount) -> String {
        switch mount.error {
        case 0: "running"
        case ENOTCONN, ECONNABORTED: "not connected"
        case ETIMEDOUT: "not answering (no answer within \(Int(RunningMount.patience)) s)"
        case EACCES, EPERM: "another user's mount (without allow_other): not yours to ask"
        default: "not answering (\(Paths.describe(mount.error)))"
        }
    }

    static func text(_ mounts: [RunningMount], now: Int) -> String {
        if mounts.isEmpty { return "no proxybundle mounts" }
        return mounts.map { mount in
            var lines = [mount.mountpoint, "  state: \(state(mount))", "  main: \(mount.main)"]
            if mount.error == ENOTCONN || mount.error == ECONNABORTED {
                lines.append("  the daemon has died; clear the mount with: proxybundle unmount \(mount.mountpoint)")
            }
            if let substitution = mount.substitution { lines.append("  substitution: \(substitution)") }
            for patch in mount.patches { lines.append("  patch: \(patch)") }
            if let pid = mount.pid { lines.append("  pid: \(pid)") }
            if let log = mount.log { lines.append("  log: \(log)") }
            if let started = mount.started { lines.append("  uptime: \(duration(now - started))") }
            if mount.isAlive {
                lines.append("  control files (by name, not listed): \(mount.mountpoint)/.invalidate, .stats, .layers, .remount")
            }
            let shown: Set<String> = ["main", "substitution", "patch", "pid", "started"]
            for (key, value) in mount.stats where !shown.contains(key) { lines.append("  \(key): \(value)") }
            return lines.joined(separator: "\n")
        }.joined(separator: "\n\n")
    }

    static func json(_ mounts: [RunningMount], now: Int) -> String {
        let objects = mounts.map { mount in
            var fields: [(String, String)] = [
                ("mountpoint", JSON.string(mount.mountpoint)),
                ("state", JSON.string(state(mount))),
                ("main", JSON.string(mount.main)),
                ("substitution", mount.substitution.map(JSON.string) ?? "null"),
                ("patches", "[" + mount.patches.map(JSON.string).joined(separator: ",") + "]"),
                ("layers", "[" + mount.layers.map { JSON.object([("role", JSON.string($0.role)), ("path", JSON.string($0.path))]) }
                    .joined(separator: ",") + "]"),
                ("pid", mount.pid.map { String($0) } ?? "null"),
                ("log", mount.log.map(JSON.string) ?? "null"),
                // the daemon's, which may be older than this command's
                ("version", mount.stat("version").map(JSON.string) ?? "null"),
                ("commit", mount.stat("commit").map(JSON.string) ?? "null"),
                ("uptime_seconds", mount.started.map { String(now - $0) } ?? "null"),
            ]
            let figures = mount.stats.filter { !["main", "substitution", "patch", "pid", "version", "commit"].contains($0.key) }
            fields.append(("stats", JSON.object(figures.map { ($0.key, JSON.value($0.value)) })))
            return JSON.object(fields)
        }
        return "[" + objects.joined(separator: ",") + "]"
    }

    /// `3d 4h 5m 6s`, leaving out leading zero units.
    static func duration(_ seconds: Int) -> String {
        let parts = [(seconds / 86400, "d"), (seconds / 3600 % 24, "h"), (seconds / 60 % 60, "m"), (seconds % 60, "s")]
        let shown = parts.drop { $0.0 == 0 && $0.1 != "s" }
        return shown.map { "\($0.0)\($0.1)" }.joined(separator: " ")
    }
}

/// Just enough JSON writing for `status --json`.
enum JSON {
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// A number when the text is one, otherwise a string.
    static func value(_ text: String) -> String {
        let numeric = text.first.map { $0 == "-" || $0.isASCII && $0.isNumber } ?? false
            && text.allSatisfy { "0123456789.-eE+".contains($0) }
        if numeric, let number = Double(text), number.isFinite { return text }
        return string(text)
    }

    static func object(_ fields: [(String, String)]) -> String {
        "{" + fields.map { string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }
}
