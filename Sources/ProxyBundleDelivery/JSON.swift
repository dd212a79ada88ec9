/// A JSON value: what OCI manifests, indexes and configs are read as, and written from.
/// Small on purpose: the delivery code reads a few fields and needs no Foundation.
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
        public let offset: Int
        public var description: String { "not valid JSON (at byte \(offset))" }
    }

    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSON {
        var parser = Parser(bytes: bytes)
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.at == bytes.count else { throw ParseError(offset: parser.at) }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var at = 0

        mutating func skipSpace() {
            while at < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[at]) { at += 1 }
        }

        func fail() -> ParseError { ParseError(offset: at) }

        mutating func expect(_ word: String) throws(ParseError) {
            for byte in word.utf8 {
                guard at < bytes.count, bytes[at] == byte else { throw fail() }
                at += 1
            }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            skipSpace()
            guard at < bytes.count, depth < 64 else { throw fail() }
            switch bytes[at] {
            case UInt8(ascii: "{"):
                at += 1
                var members: [(String, JSON)] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members) }
                while true {
                    skipSpace()
                    let key = try string()
                    skipSpace()
                    try expect(":")
                    members.append((key, try value(depth: depth + 1)))
                    skipSpace()
                    guard at < bytes.count else { throw fail() }
                    at += 1
                    if bytes[at - 1] == UInt8(ascii: "}") { return .object(members) }
                    guard bytes[at - 1] == UInt8(ascii: ",") else { throw fail() }
                }
            case UInt8(ascii: "["):
                at += 1
                var items: [JSON] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
                while true {
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard at < bytes.count else { throw fail() }
                    at += 1
                    if bytes[at - 1] == UInt8(ascii: "]") { return .array(items) }
                    guard bytes[at - 1] == UInt8(ascii: ",") else { throw fail() }
                }
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): try expect("null"); return .null
            default: return .number(try number())
            }
        }

        mutating func number() throws(ParseError) -> Double {
            let start = at
            while at < bytes.count, "+-0123456789.eE".utf8.contains(bytes[at]) { at += 1 }
            guard let n = Double(String(decoding: bytes[start..<at], as: UTF8.self)) else { throw fail() }
            return n
        }

        mutating func string() throws(ParseError) -> String {
            try expect("\"")
            var out: [UInt8] = []
            while at < bytes.count {
                let byte = bytes[at]
                at += 1
                if byte == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
                guard byte == UInt8(ascii: "\\") else { out.append(byte); continue }
                guard at < bytes.count else { throw fail() }
                let escape = bytes[at]
                at += 1
                switch escape {
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xd800..<0xdc00).contains(code), at + 6 <= bytes.count, bytes[at] == UInt8(ascii: "\\"),
                       bytes[at + 1] == UInt8(ascii: "u") {
                        at += 2
                        let low = try hex4()
                        // a high surrogate escaped before anything but a low one is not JSON (fuzzing
                        // found `\ud83d\uaaca`, whose difference overflowed and ended the process)
                        guard (0xdc00..<0xe000).contains(low) else { throw fail() }
                        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00)
                    }
                    out.append(contentsOf: String(Unicode.Scalar(code).map(Character.init) ?? "\u{fffd}").utf8)
                default: out.append(escape)
                }
            }
            throw fail()
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard at + 4 <= bytes.count, let code = UInt32(String(decoding: bytes[at..<at + 4], as: UTF8.self), radix: 16)
            else { throw fail() }
            at += 4
            return code
        }
    }
}
