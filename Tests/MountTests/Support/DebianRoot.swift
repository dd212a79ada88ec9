import Foundation

/// A clean Debian root of the machine's release (debootstrap's minbase variant: essential and
/// required packages, apt), in a mount namespace of its own with /proc, /sys and /dev, where
/// commands run chrooted. Its apt reaches Debian's mirror as the machine's does (the
/// machine's sources and apt configuration are copied in). The root is made once per machine
/// from the mirror and kept as an archive (`cache`); each test unpacks a copy of its own.
final class DebianRoot {
    let path: String
    private let namespace: PrivateNamespace
    static let cache = "/var/cache/proxybundle-tests"

    init(scratch: String) throws {
        path = scratch + "/root"
        try Disk.mkdir(path)
        let archive = try DebianRoot.archive()
        let unpacked = try Spawn.run("/usr/bin/tar", ["--zstd", "-xpf", archive, "-C", path], seconds: 300)
        guard unpacked.status == 0 else { throw TestFailure("unpacking \(archive): \(unpacked.error)") }
        // apt as the machine's: its sources, keys and settings (a mirror, a proxy)
        let copied = try Spawn.run("/bin/sh", ["-c", """
            set -e
            rm -f "$1/etc/apt/sources.list" && rm -rf "$1/etc/apt/sources.list.d" "$1/etc/apt/apt.conf.d"
            cp -a /etc/apt/sources.list.d /etc/apt/apt.conf.d "$1/etc/apt/"
            [ ! -e /etc/apt/sources.list ] || cp /etc/apt/sources.list "$1/etc/apt/"
            cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
            """, "sh", path])
        guard copied.status == 0 else { throw TestFailure("configuring apt in \(path): \(copied.error)") }
        namespace = try PrivateNamespace(scratch: scratch)
        for (source, target, type) in [("proc", "proc", "proc"), ("sysfs", "sys", "sysfs")] {
            try namespace.check("/bin/mount", ["-t", type, source, path + "/" + target])
        }
        try namespace.check("/bin/mount", ["--rbind", "/dev", path + "/dev"])
    }

    /// Runs `program` chrooted in the root (PATH and the environment of a root shell there).
    func run(_ program: String, _ arguments: [String], environment: [String] = [],
             seconds: Double = 120) throws -> (status: Int32, output: String, error: String) {
        try namespace.run("/usr/sbin/chroot", [path, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                               "HOME=/root", "LANG=C.UTF-8"] + environment + [program] + arguments,
                          seconds: seconds)
    }

    /// Unmounts everything of the namespace; the root's files stay for the caller to remove.
    func remove() {
        _ = try? namespace.run("/bin/umount", ["-R", "-l", path + "/dev"])
        namespace.remove()
    }

    /// The archive of a minbase root of the machine's release, made now if there is none.
    static func archive() throws -> String {
        let release = try String(contentsOfFile: "/etc/os-release", encoding: .utf8).split(separator: "\n")
            .first { $0.hasPrefix("VERSION_CODENAME=") }.map { String($0.dropFirst("VERSION_CODENAME=".count)) } ?? "bookworm"
        let archive = "\(cache)/debian-\(release)-minbase.tar.zst"
        if FileManager.default.fileExists(atPath: archive) { return archive }
        try Disk.mkdir(cache)
        let made = try Spawn.run("/bin/sh", ["-c", """
            set -e
            exec 9>"$1.lock"
            flock 9
            [ ! -e "$1" ] || exit 0
            work=$(mktemp -d "$1.XXXXXX")
            trap 'rm -rf "$work"' EXIT
            /usr/sbin/debootstrap --variant=minbase "$2" "$work/root" "$3" >"$work/log" 2>&1 || { tail -n 5 "$work/log" >&2; exit 1; }
            rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*_*
            tar --zstd -cpf "$work/root.tar.zst" -C "$work/root" .
            mv "$work/root.tar.zst" "$1"
            """, "sh", archive, release, try mirror()], seconds: 1800)
        guard made.status == 0 else { throw TestFailure("debootstrap of \(release) (it needs Debian's mirror): \(made.error)") }
        return archive
    }

    /// The machine's Debian mirror: the first `URIs:` (deb822) or `deb URI` (one-line) source
    /// that is not the security archive.
    static func mirror() throws -> String {
        let files = ["/etc/apt/sources.list"] + ((try? FileManager.default.contentsOfDirectory(atPath: "/etc/apt/sources.list.d")) ?? [])
            .filter { $0.hasSuffix(".sources") || $0.hasSuffix(".list") }.sorted().map { "/etc/apt/sources.list.d/" + $0 }
        for file in files {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                let words = line.split(separator: " ").map(String.init)
                let uri = line.hasPrefix("URIs:") ? words.dropFirst().first : line.hasPrefix("deb ") ? words.dropFirst().first { !$0.hasPrefix("[") } : nil
                if let uri, !uri.contains("security") { return uri }
            }
        }
        throw TestFailure("no Debian mirror in /etc/apt/sources.list(.d)")
    }
}

/// A mount namespace kept by a bind mount of it on a file (as `PrivateSystem` keeps its own),
/// in which commands run through nsenter.
final class PrivateNamespace {
    private let holder: String
    private let handle: String

    init(scratch: String) throws {
        holder = scratch + "/namespace"
        handle = holder + "/mnt"
        try Disk.mkdir(holder)
        guard mount(holder, holder, nil, UInt(MS_BIND), nil) == 0, mount(nil, holder, nil, UInt(MS_PRIVATE), nil) == 0 else {
            throw TestFailure("private bind mount of \(holder): \(String(cString: strerror(errno)))")
        }
        close(open(handle, O_CREAT | O_WRONLY, 0o600))
        let made = try Spawn.run("/usr/bin/unshare", ["--mount=\(handle)", "--propagation", "private", "/bin/true"])
        guard made.status == 0 else { throw TestFailure("unshare: \(made.error)") }
    }

    func run(_ program: String, _ arguments: [String], environment: [String] = [],
             seconds: Double = 120) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/usr/bin/nsenter", ["--mount=\(handle)", "--", program] + arguments, environment: environment, seconds: seconds)
    }

    /// Runs `program`, throwing when it fails.
    func check(_ program: String, _ arguments: [String]) throws {
        let run = try self.run(program, arguments)
        guard run.status == 0 else { throw TestFailure("\(program) \(arguments.joined(separator: " ")): \(run.error)") }
    }

    /// Lets the namespace go (it ends with its last process) and its private mount.
    func remove() {
        _ = umount2(handle, Int32(MNT_DETACH))
        _ = umount2(holder, Int32(MNT_DETACH))
    }
}
