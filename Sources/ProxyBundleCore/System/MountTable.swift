#if canImport(Glibc)
import Glibc
#endif

/// The system's mounts as `/proc/self/mountinfo` lists them.
public struct MountTable: Sendable {
    public struct Mount: Sendable, Equatable {
        public var id: Int
        /// The device number "major:minor" (for FUSE, the connection number is the minor).
        public var device: String
        /// The mountpoint's bytes as the kernel has them (not necessarily UTF-8).
        public var mountpoint: RawPath
        public var type: String
        public var source: RawPath
        /// The per-mount options (`rw`/`ro`, `nosuid`, `relatime`, ...).
        public var options: [String] = []
        /// The file system's own options (for FUSE: `user_id=`, `allow_other`, ...).
        public var superOptions: [String] = []
    }

    public var mounts: [Mount]

    public static func current() -> MountTable {
        var error: Int32 = 0
        return MountTable(bytes: readBytes("/proc/self/mountinfo", error: &error) ?? [])
    }

    public init(text: String) { self.init(bytes: Array(text.utf8)) }

    /// The table of mountinfo's bytes: paths are kept as bytes, only the kernel's octal
    /// escapes undone.
    public init(bytes: [UInt8]) {
        let space = UInt8(ascii: " ")
        mounts = bytes.split(separator: UInt8(ascii: "\n")).compactMap { line in
            let fields = line.split(separator: space, omittingEmptySubsequences: false).map { Array($0) }
            let text = { (index: Int) in String(decoding: fields[index], as: UTF8.self) }
            guard fields.count >= 10, let separator = fields.firstIndex(of: [UInt8(ascii: "-")]),
                  separator + 2 < fields.count, let id = Int(text(0)) else { return nil }
            return Mount(id: id, device: text(2), mountpoint: MountTable.unescape(fields[4]),
                         type: text(separator + 1), source: MountTable.unescape(fields[separator + 2]),
                         options: text(5).split(separator: ",").map(String.init),
                         superOptions: separator + 3 < fields.count ? text(separator + 3).split(separator: ",").map(String.init) : [])
        }
    }

    /// The topmost mount at exactly `path` (an absolute, normalised path).
    public func mount(at path: RawPath) -> Mount? {
        mounts.last { $0.mountpoint == path }
    }

    /// The mount `path` (absolute, normalised) lies on: the last of the table's mounts whose
    /// mountpoint holds it (a later mount covers an earlier one beneath it).
    public func mount(containing path: RawPath) -> Mount? {
        mounts.last { path.isInside($0.mountpoint) }
    }

    /// The topmost mount at exactly the path whose bytes are `path`'s UTF-8.
    public func mount(at path: String) -> Mount? { mount(at: RawPath(path)) }

    /// mountinfo writes space, tab, newline and backslash as octal escapes; every other byte
    /// is itself.
    static func unescape(_ field: [UInt8]) -> RawPath {
        guard field.contains(UInt8(ascii: "\\")) else { return RawPath(bytes: field) }
        var bytes: [UInt8] = []
        var rest = field[...]
        while let byte = rest.popFirst() {
            let digits = rest.prefix(3)
            if byte == UInt8(ascii: "\\"), digits.count == 3,
               digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7") }),
               let value = UInt8(String(decoding: digits, as: UTF8.self), radix: 8) {
                bytes.append(value)
                rest = rest.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return RawPath(bytes: bytes)
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
    readBytes(RawPath(path), error: &error).map { String(decoding: $0, as: UTF8.self) }
}
