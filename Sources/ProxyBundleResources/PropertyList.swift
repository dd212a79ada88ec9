import FoundationEssentials

/// The top-level dictionary of a property list, XML or binary (`bplist00`), read as
/// CoreFoundation reads a bundle's `Info.plist`: a list that is malformed anywhere is not read
/// at all. An XML list, in UTF-8, is read by FoundationEssentials' `PropertyListDecoder`
/// (Apple's own parser); a binary one by `Binary`, ours, because that decoder's binary reader is not safe on
/// what strangers write (docs/DESIGN.md: it traps on some damaged lists, and reads a shared
/// object once per reference, which 40 levels make 2^40 reads). Only what a bundle's lookup
/// keeps of each value is kept (no data bytes, no dates).
public enum PropertyList {
    public indirect enum Value: Equatable, Sendable {
        /// A number is an `integer` when it is one exactly (the decoder reads `2.0` as 2 too),
        /// else a `real`.
        case string(String), boolean(Bool), integer(Int), real(Double)
        case array([Value]), dictionary([String: Value])
        /// The kinds whose contents are not kept; `other` is a null, a set, a keyed archiver's
        /// UID (binary lists only), or an integer beyond `Int` (up to `UInt64.max`).
        case data, date, other
    }

    /// Containers nested deeper than this make the list unreadable (CoreFoundation's limit is
    /// higher; an `Info.plist` never comes near either).
    static let maxDepth = 64

    /// Why a property list was not read, in a few words (`is not a property list: …`).
    public struct Unreadable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The root dictionary of a property list, XML or binary.
    public static func read(_ bytes: [UInt8]) throws(Unreadable) -> [String: Value] {
        let root: Value
        if bytes.starts(with: Array("bplist00".utf8)) {
            var binary = Binary(bytes: bytes)
            guard let read = binary?.root() else { throw Unreadable(description: "is not a well-formed binary property list") }
            root = read
        } else {
            // UTF-8 only, as before the decoder: given bytes that are not UTF-8 inside an
            // <integer>, it stops the process (BufferView._decodeScalars; found by fuzzing)
            guard String(validating: bytes, as: UTF8.self) != nil else { throw Unreadable(description: "is not UTF-8") }
            do {
                root = try PropertyListDecoder().decode(Value.self, from: Data(bytes))
            } catch let error as DecodingError {
                throw Unreadable(description: reason(error))
            } catch {
                throw Unreadable(description: "is not a property list")
            }
        }
        guard case .dictionary(let dictionary) = root else { throw Unreadable(description: "holds no dictionary at its top") }
        return dictionary
    }

    /// The root dictionary of a property list, XML or binary; nil when it is not one or cannot be read.
    public static func dictionary(in bytes: [UInt8]) -> [String: Value]? {
        try? read(bytes)
    }

    /// The string of the root dictionary under `key`; nil when it is not a string.
    public static func string(_ key: String, in bytes: [UInt8]) -> String? {
        guard case .string(let string) = dictionary(in: bytes)?[key] else { return nil }
        return string
    }

    /// The decoder's reason on one line, without its own punctuation.
    static func reason(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            if context.debugDescription == tooDeep { return "nests more than \(maxDepth) containers" }
            let detail = (context.underlyingError.map { "\($0)" } ?? context.debugDescription)
            return "is not a property list" + (detail.isEmpty ? "" : ": " + oneLine(detail))
        default:
            return "is not a property list"
        }
    }

    static let tooDeep = "too deep"

    static func oneLine(_ text: String) -> String {
        var line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        while line.hasSuffix(".") { line.removeLast() }
        return line
    }
}

extension PropertyList.Value: Decodable {
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Whatever the list holds at this place, its kind found by asking the decoder for each in
    /// turn (a container, then the scalars: a string is never a number, a date no number). Only
    /// XML lists come here, so a value of none of the kinds is a malformed one.
    public init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count <= PropertyList.maxDepth else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: PropertyList.tooDeep))
        }
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var dictionary: [String: Self] = [:]
            for key in keyed.allKeys { dictionary[key.stringValue] = try keyed.decode(Self.self, forKey: key) }
            self = .dictionary(dictionary)
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [Self] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(Self.self)) }
            self = .array(array)
        } else {
            let single = try decoder.singleValueContainer()
            if let value = try? single.decode(Bool.self) { self = .boolean(value) }
            else if let value = try? single.decode(Int.self) { self = .integer(value) }
            else if (try? single.decode(UInt64.self)) != nil { self = .other }
            else if let value = try? single.decode(Double.self) { self = .real(value) }
            else if let value = try? single.decode(String.self) { self = .string(value) }
            else if (try? single.decode(Data.self)) != nil { self = .data }
            else if (try? single.decode(Date.self)) != nil { self = .date }
            else {  // an XML scalar of no kind (`<integer>12a</integer>`): the list is malformed
                throw DecodingError.dataCorruptedError(in: single, debugDescription: "a value that is none of the kinds")
            }
        }
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
