extension PropertyList {
    /// An XML property list in UTF-8: the root element, `<plist>` or a value itself. Comments,
    /// processing instructions and the DOCTYPE are skipped between elements; an unknown
    /// element, stray text, or a bad entity makes the whole list unreadable.
    struct XML {
        let bytes: [UInt8]
        var position = 0

        init(bytes: [UInt8]) {
            self.bytes = bytes
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { position = 3 }  // a byte order mark
        }

        mutating func root() -> Value? {
            guard let tag = nextTag(), !tag.close else { return nil }
            guard tag.name == "plist" else { return value(tag, depth: 0) }
            guard !tag.empty, let inner = nextTag(), !inner.close, let value = value(inner, depth: 0),
                  let end = nextTag(), end.close, end.name == "plist" else { return nil }
            return value
        }

        /// One value, its opening tag read already.
        mutating func value(_ tag: (name: String, close: Bool, empty: Bool), depth: Int) -> Value? {
            guard depth < PropertyList.maxDepth else { return nil }
            switch tag.name {
            case "dict", "array":
                var dictionary: [String: Value] = [:]
                var array: [Value] = []
                while !tag.empty {
                    guard let next = nextTag() else { return nil }
                    if next.close { guard next.name == tag.name else { return nil }; break }
                    var key: String? = nil
                    if tag.name == "dict" {
                        guard next.name == "key", let name = text(next) else { return nil }
                        key = name
                    }
                    guard let valueTag = key == nil ? next : nextTag(), !valueTag.close,
                          let value = value(valueTag, depth: depth + 1) else { return nil }
                    if let key { dictionary[key] = value } else { array.append(value) }
                }
                return tag.name == "dict" ? .dictionary(dictionary) : .array(array)
            case "string": return text(tag).map(Value.string)
            case "true", "false":
                guard text(tag)?.allSatisfy(\.isWhitespace) == true else { return nil }
                return .boolean(tag.name == "true")
            case "integer": return text(tag).flatMap(XML.integer)
            case "real":
                guard let text = text(tag), let value = Double(text.trimmed) else { return nil }
                return .real(value)
            case "data": return text(tag).map { _ in .data }
            case "date": return text(tag).flatMap { $0.trimmed.isEmpty ? nil : Value.date }
            default: return nil
            }
        }

        /// Decimal or `0x` hexadecimal, signed; beyond `Int` up to `UInt64.max` as CoreFoundation
        /// keeps it (a 128-bit number), further is an error.
        static func integer(_ text: String) -> Value? {
            var digits = text.trimmed[...]
            let negative = digits.first == "-"
            if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
            let hex = digits.hasPrefix("0x") || digits.hasPrefix("0X")
            guard let magnitude = UInt64(hex ? digits.dropFirst(2) : digits, radix: hex ? 16 : 10) else { return nil }
            if negative { return magnitude <= UInt64(Int.max) + 1 ? .integer(Int(truncatingIfNeeded: 0 &- magnitude)) : nil }
            return Int(exactly: magnitude).map(Value.integer) ?? .other
        }

        /// The text of element `tag` up to its closing tag: entities decoded, CDATA kept as is.
        mutating func text(_ tag: (name: String, close: Bool, empty: Bool)) -> String? {
            if tag.empty { return "" }
            var text: [UInt8] = []
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "&") {
                    guard let end = bytes[position...].prefix(12).firstIndex(of: UInt8(ascii: ";")),
                          let scalar = XML.entity(bytes[position + 1 ..< end]) else { return nil }
                    text += Array(String(scalar).utf8)
                    position = end + 1
                } else if byte == UInt8(ascii: "<") {
                    if skip(past: "]]>", ifAt: "<![CDATA[", keeping: &text) { continue }
                    // the closing tag, right here (a comment would be skipped by nextTag: an error)
                    guard bytes[position...].dropFirst().first == UInt8(ascii: "/"), let end = nextTag(),
                          end.close, end.name == tag.name else { return nil }
                    return String(validating: text, as: UTF8.self)
                } else {
                    text.append(byte)
                    position += 1
                }
            }
            return nil
        }

        static func entity(_ name: ArraySlice<UInt8>) -> Unicode.Scalar? {
            switch String(decoding: name, as: UTF8.self) {
            case "lt": return "<"
            case "gt": return ">"
            case "amp": return "&"
            case "quot": return "\""
            case "apos": return "'"
            case let reference where reference.hasPrefix("#x"): return UInt32(reference.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
            case let reference where reference.hasPrefix("#"): return UInt32(reference.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
            default: return nil
            }
        }

        /// The next tag, past white space, comments, processing instructions and the DOCTYPE;
        /// nil at the end, at text, or at a malformed tag.
        mutating func nextTag() -> (name: String, close: Bool, empty: Bool)? {
            while true {
                while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
                guard position < bytes.count, bytes[position] == UInt8(ascii: "<") else { return nil }
                if skip(past: "-->", ifAt: "<!--") || skip(past: "?>", ifAt: "<?") { continue }
                if bytes[position...].starts(with: Array("<!".utf8)) {  // DOCTYPE, its internal subset in [ ]
                    var brackets = 0
                    while position < bytes.count, bytes[position] != UInt8(ascii: ">") || brackets > 0 {
                        if bytes[position] == UInt8(ascii: "[") { brackets += 1 }
                        if bytes[position] == UInt8(ascii: "]") { brackets -= 1 }
                        position += 1
                    }
                    guard position < bytes.count else { return nil }
                    position += 1
                    continue
                }
                // a tag: its name, attributes (quoted values may hold '>'), then '>' or '/>'
                let close = bytes[position...].dropFirst().first == UInt8(ascii: "/")
                var end = position + (close ? 2 : 1)
                let start = end
                var quote: UInt8? = nil
                while end < bytes.count, bytes[end] != UInt8(ascii: ">") || quote != nil {
                    if bytes[end] == quote { quote = nil } else if quote == nil, bytes[end] == 0x22 || bytes[end] == 0x27 { quote = bytes[end] }
                    end += 1
                }
                guard end < bytes.count else { return nil }
                let inside = bytes[start ..< end]
                let name = inside.prefix { ![0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: "/")].contains($0) }
                position = end + 1
                return (String(decoding: name, as: UTF8.self), close, inside.last == UInt8(ascii: "/"))
            }
        }

        /// If the bytes at the position start with `opening`: moves past the next `closing`
        /// (to the end when there is none, where the caller fails), appends what is between to
        /// `kept`, and returns true.
        mutating func skip(past closing: String, ifAt opening: String, keeping kept: inout [UInt8]) -> Bool {
            guard bytes[position...].starts(with: Array(opening.utf8)) else { return false }
            let start = position + opening.utf8.count
            let end = bytes[start...].firstRange(of: Array(closing.utf8))
            kept += bytes[start ..< (end?.lowerBound ?? bytes.count)]
            position = end?.upperBound ?? bytes.count
            return true
        }

        mutating func skip(past closing: String, ifAt opening: String) -> Bool {
            var ignored: [UInt8] = []
            return skip(past: closing, ifAt: opening, keeping: &ignored)
        }
    }
}

extension StringProtocol {
    /// Without leading and trailing white space (XML's: space, tab, line feed, carriage return).
    var trimmed: SubSequence {
        let isSpace: (Character) -> Bool = { " \t\n\r\r\n".contains($0) }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}
