#if canImport(Glibc)
import Glibc
#endif

/// A path on this machine as the bytes the kernel takes: a layer's, a mountpoint's. Linux
/// paths need not be UTF-8 (`caf\xE9.app` is a valid directory name), and a `String` cannot
/// hold such bytes, so a path is kept as bytes from the argument or the file it came from to
/// the system call that uses it.
///
/// Text made from a path is for people only: `description` writes each byte that is not part
/// of valid UTF-8 as `\xHH` (for logs, which are text); what a command prints or a control
/// file shows carries the bytes themselves.
public struct RawPath: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public var bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The bytes in one call (the synthesized hash feeds them one at a time: a write of 1,000
    /// patches' paths to `.layers` hashed 60,000 bytes one by one to find the patches kept).
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// The path whose bytes are `text`'s UTF-8 (exact: every `String` is valid UTF-8).
    public init(_ text: String) { bytes = Array(text.utf8) }

    public init(stringLiteral text: String) { self.init(text) }

    /// The bytes of a C string.
    public init(cString: UnsafePointer<CChar>) {
        bytes = Array(UnsafeRawBufferPointer(start: cString, count: strlen(cString)))
    }

    public static let root = RawPath("/")

    public var isEmpty: Bool { bytes.isEmpty }
    public var isAbsolute: Bool { bytes.first == RawPath.slash }

    /// The path as text when it is valid UTF-8; nil otherwise.
    public var text: String? { String(validating: bytes, as: UTF8.self) }

    /// The path with `name` (one or more names, no leading slash) below it.
    public func appending(_ name: [UInt8]) -> RawPath {
        RawPath(bytes: (bytes.last == RawPath.slash ? bytes : bytes + [RawPath.slash]) + name)
    }

    public func appending(_ name: String) -> RawPath { appending(Array(name.utf8)) }

    /// The last name ("" for the root).
    public var lastName: [UInt8] {
        Array(bytes.split(separator: RawPath.slash).last ?? [])
    }

    /// The directory that holds the last name ("/" for a name in the root, "." for a
    /// relative path of one name).
    public var parent: RawPath {
        guard let slash = bytes.lastIndex(of: RawPath.slash) else { return "." }
        return slash == 0 ? .root : RawPath(bytes: Array(bytes[..<slash]))
    }

    /// Whether this path is `ancestor` or lies beneath it (both canonical).
    public func isInside(_ ancestor: RawPath) -> Bool {
        self == ancestor || ancestor == .root || bytes.starts(with: ancestor.bytes + [RawPath.slash])
    }

    /// Runs `body` with the path as a NUL-terminated C string.
    public func withCString<T, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> T) throws(E) -> T {
        try bytes.withCStringCopy(body)
    }

    /// For people and logs: the UTF-8 as it is, any other byte as `\xHH`.
    public var description: String {
        if let text { return text }
        return RawPath.pieces(bytes).map { piece in
            piece.text ?? "\\x" + (piece.byte < 0x10 ? "0" : "") + String(piece.byte, radix: 16, uppercase: true)
        }.joined()
    }

    /// The pieces of `bytes`, in order: each run of valid UTF-8 as text, or a single byte that
    /// is not part of valid UTF-8.
    public static func pieces(_ bytes: [UInt8]) -> [(text: String?, byte: UInt8)] {
        var result: [(text: String?, byte: UInt8)] = []
        var rest = bytes[...]
        while !rest.isEmpty {
            let valid = validPrefixLength(rest)
            if valid > 0 { result.append((String(decoding: rest.prefix(valid), as: UTF8.self), 0)) }
            rest = rest.dropFirst(valid)
            if let byte = rest.popFirst() { result.append((nil, byte)) }
        }
        return result
    }

    /// How many leading bytes of `bytes` are whole, valid UTF-8 characters.
    static func validPrefixLength(_ bytes: ArraySlice<UInt8>) -> Int {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let lead = bytes[index]
            let length = lead < 0x80 ? 1 : lead >= 0xC2 && lead < 0xE0 ? 2 : lead >= 0xE0 && lead < 0xF0 ? 3
                : lead >= 0xF0 && lead < 0xF5 ? 4 : 0
            guard length > 0, index + length <= bytes.endIndex,
                  String(validating: bytes[index ..< index + length], as: UTF8.self) != nil else { break }
            index += length
        }
        return index - bytes.startIndex
    }

    static let slash = UInt8(ascii: "/")
}

/// The whole contents of a small file as bytes, or nil with `error` set to the errno of the
/// failed open or read.
public func readBytes(_ path: RawPath, error: inout Int32) -> [UInt8]? {
    let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
    guard fd >= 0 else { error = errno; return nil }
    defer { close(fd) }
    return readAll(fd, error: &error)
}

/// Everything left to read from `fd` (a file, a pipe, standard input), or nil with `error` set.
public func readAll(_ fd: Int32, error: inout Int32) -> [UInt8]? {
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = read(fd, &chunk, chunk.count)
        if count < 0 && errno == EINTR { continue }
        if count < 0 { error = errno; return nil }
        if count == 0 { break }
        data.append(contentsOf: chunk[..<count])
    }
    return data
}
