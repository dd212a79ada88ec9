import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// The processes that ran this one as a mount helper: mount(8) runs fuse3's `mount.fuse3`,
/// which runs `proxybundle MAIN MOUNTPOINT -o OPTIONS` (through `sh -c`). What each passes on,
/// traced with strace (util-linux 2.38, fuse3 3.14): mount(8) drops the words that ask for
/// the VFS defaults (`dev`, `suid`, `exec`) from an fstab line and from its `-o` alike, and
/// passes `rw` and the rest (`nodev`, `nosuid`, `noexec` too); mount.fuse3, as root, then
/// appends `dev` unless the options say `nodev`, and `suid` unless they say `nosuid`. So
/// `dev` and `suid` reach the helper whether an administrator wrote them or not, and the
/// words written are found only where they were written: in mount(8)'s own arguments (as
/// systemd's mount units run it: `mount SOURCE TARGET -t TYPE -o OPTIONS`), and in the fstab
/// line it looked up when given one path or `-a`.
struct MountCaller {
    /// mount(8)'s arguments, after its name.
    var arguments: [String]

    /// The nearest mount(8) among this process's ancestors (a few levels up), if any. (The
    /// process between is `sh`: mount.fuse3 execs `/bin/sh -c` in its own place. mount(8)
    /// runs no other helper of ours: the package installs no `mount.fuse.proxybundle`.)
    static func find() -> MountCaller? {
        var pid = getppid()
        for _ in 0 ..< 5 where pid > 1 {
            if executableName(pid) == "mount" {
                var error: Int32 = 0
                guard let raw = readBytes(RawPath("/proc/\(pid)/cmdline"), error: &error) else { return nil }
                let words = raw.split(separator: 0).map { RawArguments.text(of: Array($0)) }
                return MountCaller(arguments: Array(words.dropFirst()))
            }
            guard let parent = parentPID(pid) else { return nil }
            pid = parent
        }
        return nil
    }

    /// The last of `yes` and `no` among the option words mount(8) was given for `mountpoint`
    /// (its fstab line's first, then its `-o`): `yes` (true), `no` (false), or nil when neither
    /// was written.
    func written(_ yes: String, or no: String, mountpoint: RawPath) -> Bool? {
        var answer: Bool? = nil
        for word in optionWords(mountpoint: mountpoint) {
            if word == yes { answer = true }
            if word == no { answer = false }
        }
        return answer
    }

    /// mount(8)'s options for `mountpoint`: its fstab line's, when it looked one up (it was
    /// given fewer than two paths), then its `-o` lists.
    func optionWords(mountpoint: RawPath) -> [String] {
        var lists: [String] = []
        var fstab = "/etc/fstab"
        var paths = 0
        var index = 0
        // mount(8)'s options that take a value, which is then not a path
        let valued: Set<String> = ["-t", "--types", "-O", "--test-opts", "-L", "--label", "-U", "--uuid", "-N",
                                   "--namespace", "--source", "--target", "--target-prefix", "--options-mode",
                                   "--options-source", "-o", "--options", "-T", "--fstab"]
        while index < arguments.count {
            let word = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : ""
            if word == "-o" || word == "--options" { lists.append(value) }
            else if word.hasPrefix("--options=") { lists.append(String(word.dropFirst(10))) }
            else if word.hasPrefix("-o") && word.count > 2 { lists.append(String(word.dropFirst(2))) }
            else if word == "-T" || word == "--fstab" { fstab = value }
            else if word.hasPrefix("--fstab=") { fstab = String(word.dropFirst(8)) }
            else if word == "--source" || word == "--target" { paths += 1 }
            else if !word.hasPrefix("-") { paths += 1 }
            index += valued.contains(word) ? 2 : 1
        }
        var words: [String] = []
        if paths < 2, let line = MountCaller.fstabOptions(RawPath(argument: fstab), mountpoint: mountpoint) {
            words += line.split(separator: ",").map(String.init)
        }
        for list in lists { words += list.split(separator: ",").map(String.init) }
        return words
    }

    /// The options field of the line of `fstab` whose mountpoint is `mountpoint`.
    static func fstabOptions(_ fstab: RawPath, mountpoint: RawPath) -> String? {
        var error: Int32 = 0
        guard let bytes = readBytes(fstab, error: &error) else { return nil }
        let wanted = Paths.absolute(mountpoint)
        var found: String? = nil
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
            guard fields.count >= 4, fields[0].first != UInt8(ascii: "#") else { continue }
            if Paths.absolute(RawPath(bytes: unescaped(fields[1]))) == wanted {
                found = String(decoding: fields[3], as: UTF8.self)  // the last line of a mountpoint wins, as for mount(8)
            }
        }
        return found
    }

    /// An fstab field with its octal escapes (`\040` for a space) decoded.
    private static func unescaped(_ field: ArraySlice<UInt8>) -> [UInt8] {
        var result: [UInt8] = []
        var index = field.startIndex
        while index < field.endIndex {
            let digits = field[index...].dropFirst().prefix(3)
            if field[index] == UInt8(ascii: "\\"), digits.count == 3, digits.allSatisfy({ (0x30...0x37).contains($0) }) {
                result.append(digits.reduce(0) { $0 &* 8 &+ ($1 - 0x30) })
                index += 4
            } else {
                result.append(field[index])
                index += 1
            }
        }
        return result
    }

    private static func executableName(_ pid: pid_t) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.split(separator: "/").last.map(String.init)
    }

    private static func parentPID(_ pid: pid_t) -> pid_t? {
        var error: Int32 = 0
        guard let stat = readBytes(RawPath("/proc/\(pid)/stat"), error: &error),
              let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // after the command: state, then the parent's pid
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 1 else { return nil }
        return pid_t(String(decoding: fields[1], as: UTF8.self))
    }
}
