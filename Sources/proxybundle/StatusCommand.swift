import ArgumentParser
import ProxyBundleCore
import ProxyBundleDelivery
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
        // one mount asked once: asking all first waited twice for a daemon that does not answer
        var mounts: [RunningMount] = []
        if let mountpoint {
            let path = RawPath(argument: mountpoint)
            guard let mount = RunningMount.at(Paths.absolute(path)) else {
                throw Failure("\(path) is not a proxybundle mount")
            }
            mounts = [mount]
        } else {
            mounts = RunningMount.all()
        }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let text = json ? StatusCommand.json(mounts, now: now.tv_sec) : StatusCommand.text(mounts, now: now.tv_sec)
        (text + "\n").write()
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

    /// The mounts for people: each path the bytes it is, UTF-8 or not.
    static func text(_ mounts: [RunningMount], now: Int) -> ByteText {
        if mounts.isEmpty { return "no proxybundle mounts" }
        return ByteText.joined(mounts.map { mount in
            var lines: [ByteText] = ["\(mount.mountpoint)", "  state: \(state(mount))", "  main: \(mount.main)"]
            if mount.error == ENOTCONN || mount.error == ECONNABORTED {
                lines.append("  the daemon has died; clear the mount with: proxybundle unmount \(mount.mountpoint)")
            }
            if let substitution = mount.substitution {
                lines.append("  substitution: \(substitution)")
            } else {
                lines.append("  substitution: none (read-only)")
            }
            for patch in mount.patches { lines.append("  patch: \(patch)") }
            for image in PatchImage.of(mount) {
                lines.append("  image: \(image.reference) \(image.manifest) (\(image.patches.count) of the patches), \(image.verification)")
            }
            if let pid = mount.pid { lines.append("  pid: \(pid)") }
            if let log = mount.log {
                lines.append("  log: \(log)" + (mount.logsInPlaceOfSyslog ? " (syslog was not reachable)" : ""))
            }
            if let started = mount.started { lines.append("  uptime: \(duration(now - started))") }
            if mount.isAlive {
                lines.append("  control files (by name, not listed): \(mount.mountpoint.appending(".invalidate")), .stats, .layers, .remount")
            }
            let shown: Set<String> = ["main", "substitution", "patch", "pid", "started"]
            for (key, value) in mount.stats where !shown.contains(key) { lines.append("  \(key): \(RawPath(bytes: value))") }
            return ByteText.joined(lines)
        }, separator: "\n\n")
    }

    /// The mounts for scripts. A path is a JSON string; one that is not valid UTF-8 has each
    /// byte that is not part of valid UTF-8 written as the escape `\\udcXX` (U+DC00 plus the
    /// byte, a lone low surrogate: the "surrogateescape" of PEP 383), which valid UTF-8 never
    /// gives, so the bytes can be told back exactly (in Python, `os.fsencode(value)`). A path
    /// that is UTF-8 is its plain string, as before.
    static func json(_ mounts: [RunningMount], now: Int) -> ByteText {
        let objects = mounts.map { mount in
            var fields: [(String, String)] = [
                ("mountpoint", JSON.path(mount.mountpoint)),
                ("state", JSON.string(state(mount))),
                ("main", JSON.path(mount.main)),
                ("substitution", mount.substitution.map(JSON.path) ?? "null"),
                ("patches", "[" + mount.patches.map(JSON.path).joined(separator: ",") + "]"),
                ("images", "[" + PatchImage.of(mount).map { image in
                    JSON.object([("reference", JSON.string(image.reference)), ("manifest", JSON.string(image.manifest)),
                                 ("patches", "[" + image.patches.map(JSON.path).joined(separator: ",") + "]"),
                                 ("signedBy", "[" + image.signers.map(JSON.string).joined(separator: ",") + "]")])
                }.joined(separator: ",") + "]"),
                ("layers", "[" + mount.layers.map { JSON.object([("role", JSON.string($0.role)), ("path", JSON.path($0.path))]) }
                    .joined(separator: ",") + "]"),
                ("pid", mount.pid.map { String($0) } ?? "null"),
                ("log", mount.log.map(JSON.path) ?? "null"),
                // the daemon's, which may be older than this command's
                ("version", mount.stat("version").map(JSON.string) ?? "null"),
                ("commit", mount.stat("commit").map(JSON.string) ?? "null"),
                ("uptime_seconds", mount.started.map { String(now - $0) } ?? "null"),
            ]
            let figures = mount.stats.filter { !["main", "substitution", "patch", "pid", "version", "commit"].contains($0.key) }
            fields.append(("stats", JSON.object(figures.map { figure in
                let text = String(validating: figure.value, as: UTF8.self)
                return (figure.key, text.map(JSON.value) ?? JSON.path(RawPath(bytes: figure.value)))
            })))
            return JSON.object(fields)
        }
        return ByteText(bytes: Array(("[" + objects.joined(separator: ",") + "]").utf8))
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
    /// A path as a JSON string: see `StatusCommand.json` for the bytes that are not UTF-8.
    static func path(_ path: RawPath) -> String {
        let pieces = RawPath.pieces(path.bytes).map { piece in
            piece.text.map { String(string($0).dropFirst().dropLast()) } ?? "\\udc" + hex(piece.byte, digits: 2)
        }
        return "\"" + pieces.joined() + "\""
    }

    static func string(_ text: String) -> String {
        ProxyBundleDelivery.JSON.quote(text)
    }

    static func hex<T: BinaryInteger>(_ value: T, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
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
