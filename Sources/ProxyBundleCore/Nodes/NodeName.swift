#if canImport(Glibc)
import Glibc
#endif

/// A node's name. Up to 31 bytes (almost every file name) are kept inside the node, so a
/// cached name needs no allocation of its own; a longer name is an array.
enum NodeName: Equatable {
    /// The bytes, zero-padded, with their count in the last byte.
    case short(UInt64, UInt64, UInt64, UInt64)
    case long([UInt8])

    static let shortLimit = 31

    init(_ bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { NodeName($0) }
    }

    init(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count <= NodeName.shortLimit else {
            self = .long(Array(bytes))
            return
        }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &words) { raw in
            if let base = bytes.baseAddress { raw.baseAddress?.copyMemory(from: base, byteCount: bytes.count) }
            raw[NodeName.shortLimit] = UInt8(bytes.count)
        }
        self = .short(words.0, words.1, words.2, words.3)
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch self {
        case .long(let bytes):
            return bytes.withUnsafeBytes(body)
        case .short(let a, let b, let c, let d):
            let words = (a, b, c, d)
            return withUnsafeBytes(of: words) { raw in
                body(UnsafeRawBufferPointer(rebasing: raw[0..<Int(raw[NodeName.shortLimit])]))
            }
        }
    }

    var bytes: [UInt8] { withBytes { Array($0) } }

    var count: Int { withBytes { $0.count } }

    /// Whether the name is `other`, byte for byte.
    func matches(_ other: [UInt8]) -> Bool {
        withBytes { mine in
            other.withUnsafeBytes { theirs in
                guard mine.count == theirs.count, let a = mine.baseAddress, let b = theirs.baseAddress else {
                    return mine.count == theirs.count
                }
                return memcmp(a, b, mine.count) == 0
            }
        }
    }
}
