import FoundationEssentials

/// A JSON value: what OCI manifests, indexes and configs, policies, signatures and the store's
/// records are read as, and written from. Reading is FoundationEssentials' `JSONDecoder`; this
/// type is the tree it decodes into, for code that reads a few fields of documents that
/// strangers write.
public enum JSON: Equatable, Sendable {
    case null, bool(Bool), number(Double), string(String), array([JSON]), object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool { a.text == b.text }

    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.0 == key }?.1
    }

    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var array: [JSON]? { if case .array(let a) = self { a } else { nil } }
    public var number: Double? { if case .number(let n) = self { n } else { nil } }

    /// Compact text, members in the order given (callers sort them where it matters).
    public var text: String {
        switch self {
        case .null: "null"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n == n.rounded() && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .string(let s): JSON.quote(s)
        case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
        case .object(let members): "{" + members.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    /// `s` as a JSON string: quoted, with `"`, `\\` and control characters escaped.
    public static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    public struct ParseError: Error, CustomStringConvertible {
        /// The decoder's reason, on one line.
        public let reason: String
        public var description: String { "not valid JSON" + (reason.isEmpty ? "" : " (\(reason))") }
    }

    /// Containers nested deeper than this are refused (an OCI document nests a few levels).
    static let maxDepth = 64

    /// `bytes` read by FoundationEssentials' `JSONDecoder`: RFC 8259 JSON, UTF-8.
    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSON {
        do {
            return try JSONDecoder().decode(JSON.self, from: Data(bytes))
        } catch let DecodingError.dataCorrupted(context) {
            let detail = context.underlyingError.map { "\($0)" } ?? context.debugDescription
            throw ParseError(reason: oneLine(detail))
        } catch {
            throw ParseError(reason: "")
        }
    }

    /// A reason on one line, without its closing full stop.
    static func oneLine(_ text: String) -> String {
        var line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        while line.hasSuffix(".") { line.removeLast() }
        return line
    }
}

extension JSON: Decodable {
    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Whatever the document holds at this place: an object (its members in key order: the
    /// decoder keeps none), an array, or a scalar.
    public init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count < JSON.maxDepth else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "nested deeper than \(JSON.maxDepth)"))
        }
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            self = .object(try keyed.allKeys.sorted { $0.stringValue < $1.stringValue }.map {
                ($0.stringValue, try keyed.decode(JSON.self, forKey: $0))
            })
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var items: [JSON] = []
            while !unkeyed.isAtEnd { items.append(try unkeyed.decode(JSON.self)) }
            self = .array(items)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { self = .null }
            else if let value = try? single.decode(Bool.self) { self = .bool(value) }
            else if let value = try? single.decode(Double.self) { self = .number(value) }
            else { self = .string(try single.decode(String.self)) }
        }
    }
}
