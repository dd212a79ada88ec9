#if canImport(Glibc)
import Glibc
#endif

/// The system's mounts as `/proc/self/mountinfo` lists them.
public struct MountTable: Sendable {
    public struct Mount: Sendable, Equatable {
        public var id: Int
        /// The device number "major:minor" (for FUSE, the connection number is the minor).
        public var device: String
        public var mountpoint: String
        public var type: String
        public var source: String
        /// The per-mount options (`rw`/`ro`, `nosuid`, `relatime`, ...).
        public var options: [String] = []
        /// The file system's own options (for FUSE: `user_id=`, `allow_other`, ...).
        public var superOptions: [String] = []
    }

    public var mounts: [Mount]

    public static func current() -> MountTable {
        MountTable(text: readText("/proc/self/mountinfo") ?? "")
    }

    public init(text: String) {
        mounts = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 10, let separator = fields.firstIndex(of: "-"), separator + 2 < fields.count,
                  let id = Int(fields[0]) else { return nil }
            return Mount(id: id, device: fields[2], mountpoint: MountTable.unescape(fields[4]),
                         type: fields[separator + 1], source: MountTable.unescape(fields[separator + 2]),
                         options: fields[5].split(separator: ",").map(String.init),
                         superOptions: separator + 3 < fields.count ? fields[separator + 3].split(separator: ",").map(String.init) : [])
        }
    }

    /// The topmost mount at exactly `path` (an absolute, normalised path).
    public func mount(at path: String) -> Mount? {
        mounts.last { $0.mountpoint == path }
    }

    /// mountinfo writes space, tab, newline and backslash as octal escapes.
    static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var bytes: [UInt8] = []
        var chars = Array(field.utf8)[...]
        while let c = chars.popFirst() {
            if c == UInt8(ascii: "\\"), chars.count >= 3,
               let value = UInt8(String(decoding: chars.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                chars = chars.dropFirst(3)
            } else {
                bytes.append(c)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The whole contents of a small text file, or nil.
public func readText(_ path: String) -> String? {
    var error: Int32 = 0
    return readText(path, error: &error)
}

/// The whole contents of a small text file, or nil with `error` set to the errno of the
/// failed open or read.
public func readText(_ path: String, error: inout Int32) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { error = errno; return nil }
    defer { close(fd) }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(fd, &chunk, chunk.count)
        if count < 0 && errno == EINTR { continue }
        if count < 0 { error = errno; return nil }
        if count == 0 { break }
        data.append(contentsOf: chunk[..<count])
    }
    return String(decoding: data, as: UTF8.self)
}
