/// The top-level dictionary of a property list, XML or binary (`bplist00`), read as
/// CoreFoundation reads a bundle's `Info.plist`: a list that is malformed anywhere is not read
/// at all. Only what a bundle's lookup asks of a value is kept (no data bytes, no dates).
public enum PropertyList {
    public indirect enum Value: Equatable, Sendable {
        case string(String), boolean(Bool), integer(Int), real(Double)
        case array([Value]), dictionary([String: Value])
        /// The kinds whose contents are not kept; `other` is a null, a set, a keyed archiver's
        /// UID, or an integer beyond `Int` (up to `UInt64.max`).
        case data, date, other
    }

    /// Containers nested deeper than this make the list unreadable (CoreFoundation's limit is
    /// higher; an `Info.plist` never comes near either).
    static let maxDepth = 64

    /// The root dictionary of a property list, XML or binary; nil when it is not one or cannot be read.
    public static func dictionary(in bytes: [UInt8]) -> [String: Value]? {
        let root: Value?
        if bytes.starts(with: Array("bplist00".utf8)) {
            var binary = Binary(bytes: bytes)
            root = binary?.root()
        } else {
            var xml = XML(bytes: bytes)
            root = xml.root()
        }
        guard case .dictionary(let dictionary) = root else { return nil }
        return dictionary
    }

    /// The string of the root dictionary under `key`; nil when it is not a string.
    public static func string(_ key: String, in bytes: [UInt8]) -> String? {
        guard case .string(let string) = dictionary(in: bytes)?[key] else { return nil }
        return string
    }
}

extension PropertyList.Value {
    /// The value as `_CFBundleGetInfoDictionaryBoolean` reads it: a boolean; a string equal,
    /// ignoring case, to "true" or "YES"; a number that converts exactly to a non-zero 32-bit
    /// integer (CFNumberGetValue as SInt32: 0.5, 1.5 and 2^32 are lossy, so false); else false.
    public var boolValue: Bool {
        switch self {
        case .boolean(let value): return value
        case .string(let value): return ["true", "yes"].contains(value.lowercased())
        case .integer(let value): return Int32(exactly: value).map { $0 != 0 } ?? false
        case .real(let value): return Int32(exactly: value).map { $0 != 0 } ?? false
        default: return false
        }
    }

    /// The non-empty strings of an array, in order (others are skipped); none for anything else.
    public var strings: [String] {
        guard case .array(let values) = self else { return [] }
        return values.compactMap { value -> String? in
            guard case .string(let string) = value, !string.isEmpty else { return nil }
            return string
        }
    }
}
