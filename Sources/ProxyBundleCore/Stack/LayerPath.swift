/// A path relative to a layer's root: empty for the root itself, otherwise names joined by
/// "/". Names are raw bytes as the kernel gave them, never converted to `String`.
public struct LayerPath: Hashable, Sendable, CustomStringConvertible {
    public private(set) var bytes: [UInt8]

    public static let root = LayerPath(bytes: [])

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public init(_ text: String) {
        self.bytes = Array(text.utf8).split(separator: UInt8(ascii: "/")).joined(separator: [UInt8(ascii: "/")]).map { $0 }
    }

    /// The bytes in one call (the synthesized hash feeds them one at a time).
    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public var isRoot: Bool { bytes.isEmpty }
    public var isSingleName: Bool { !bytes.isEmpty && !bytes.contains(UInt8(ascii: "/")) }

    public func appending(_ name: [UInt8]) -> LayerPath {
        if bytes.isEmpty { return LayerPath(bytes: name) }
        var joined = bytes
        joined.reserveCapacity(bytes.count + 1 + name.count)
        joined.append(UInt8(ascii: "/"))
        joined.append(contentsOf: name)
        return LayerPath(bytes: joined)
    }

    /// The path cut at slashes into paths of fewer than `limit` bytes each (a name has at
    /// most 255), in order: each piece is the path below the one before.
    public func pieces(shorterThan limit: Int) -> [LayerPath] {
        var result: [LayerPath] = []
        var current: [UInt8] = []
        for name in bytes.split(separator: UInt8(ascii: "/")) {
            if !current.isEmpty && current.count + 1 + name.count >= limit {
                result.append(LayerPath(bytes: current))
                current = []
            }
            if !current.isEmpty { current.append(UInt8(ascii: "/")) }
            current.append(contentsOf: name)
        }
        result.append(LayerPath(bytes: current))
        return result
    }

    /// The path as a NUL-terminated C string; the root is ".".
    public func withCString<T, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> T) throws(E) -> T {
        if bytes.isEmpty { return try body(".") }
        return try bytes.withCStringCopy(body)
    }

    public var description: String {
        bytes.isEmpty ? "." : String(decoding: bytes, as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    /// Runs `body` with a NUL-terminated copy of these bytes on the stack.
    @inline(__always)
    public func withCStringCopy<T, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> T) throws(E) -> T {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { (buffer) throws(E) -> T in
            // capacity is at least 1, so the allocation has an address
            let base = buffer.baseAddress.unsafelyUnwrapped
            self.withUnsafeBytes { source in
                if let from = source.baseAddress {
                    UnsafeMutableRawPointer(base).copyMemory(from: from, byteCount: source.count)
                }
            }
            base[count] = 0
            return try body(base)
        }
    }
}
