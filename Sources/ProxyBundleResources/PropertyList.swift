/// Reads one string of the top-level dictionary of a property list, XML or binary: all a
/// bundle's lookup needs of its `Info.plist` (`CFBundleDevelopmentRegion`). Nothing else of
/// the format is understood; a list it cannot read has no such string.
public enum PropertyList {
    public static func string(_ key: String, in bytes: [UInt8]) -> String? {
        if bytes.starts(with: Array("bplist00".utf8)) { return Binary(bytes: bytes)?.string(key) }
        return xmlString(key, in: bytes)
    }

    // MARK: XML

    /// The `<string>` right after `<key>KEY</key>` at the top level of the root `<dict>`.
    static func xmlString(_ key: String, in bytes: [UInt8]) -> String? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var depth = 0
        var index = text.startIndex
        var lastKey: String? = nil
        while let open = text[index...].firstIndex(of: "<") {
            guard let close = text[open...].firstIndex(of: ">") else { return nil }
            let inside = text[text.index(after: open) ..< close]
            let tag = inside.prefix { $0 != " " && $0 != "\t" && $0 != "\n" }
            index = text.index(after: close)
            if tag.hasPrefix("?") || tag.hasPrefix("!") || tag == "plist" || tag == "/plist" { continue }
            if tag == "dict" { depth += 1; continue }
            if tag == "/dict" { depth -= 1; continue }
            if inside.hasSuffix("/") { lastKey = nil; continue }  // <true/>, <false/>, <dict/>...
            if tag.hasPrefix("/") { continue }
            guard let end = text[index...].firstRange(of: "</" + tag + ">") else { return nil }
            let value = unescaped(String(text[index ..< end.lowerBound]))
            if tag == "key" {
                lastKey = depth == 1 ? value : nil
                index = end.upperBound
                continue
            }
            if depth == 1, lastKey == key, tag == "string" { return value }
            lastKey = nil
            // a value's contents are skipped whole (an array's too); a dict is walked
            index = end.upperBound
        }
        return nil
    }

    private static func unescaped(_ text: String) -> String {
        text.replacingAll("&lt;", "<").replacingAll("&gt;", ">").replacingAll("&quot;", "\"")
            .replacingAll("&apos;", "'").replacingAll("&amp;", "&")
    }

    // MARK: binary

    /// A `bplist00`: its trailer, and objects read by reference.
    struct Binary {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let count: Int
        let top: Int
        let table: Int

        init?(bytes: [UInt8]) {
            guard bytes.count >= 40 else { return nil }
            let trailer = bytes.count - 32
            self.bytes = bytes
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else { return nil }
            count = Binary.integer(bytes, at: trailer + 8, size: 8)
            top = Binary.integer(bytes, at: trailer + 16, size: 8)
            table = Binary.integer(bytes, at: trailer + 24, size: 8)
            guard count > 0, count <= trailer, top >= 0, top < count, table >= 8, table <= trailer,
                  table + count * offsetSize <= trailer else { return nil }
        }

        static func integer(_ bytes: [UInt8], at offset: Int, size: Int) -> Int {
            var value = 0
            for byte in bytes[offset ..< offset + size] { value = value << 8 | Int(byte) }
            return value
        }

        /// Where object `reference` starts.
        func offset(of reference: Int) -> Int? {
            guard reference >= 0, reference < count else { return nil }
            let offset = Binary.integer(bytes, at: table + reference * offsetSize, size: offsetSize)
            return offset >= 8 && offset < table ? offset : nil
        }

        /// The marker's kind (high nibble), its length, and where its contents start.
        func header(at offset: Int) -> (kind: UInt8, length: Int, start: Int)? {
            let marker = bytes[offset]
            var length = Int(marker & 0x0F)
            var start = offset + 1
            if length == 0x0F && marker >> 4 != 0 {
                // the length follows as an integer object: 0x1N, then 2^N bytes
                guard start < table, bytes[start] >> 4 == 1 else { return nil }
                let size = 1 << Int(bytes[start] & 0x0F)
                guard start + 1 + size <= table else { return nil }
                length = Binary.integer(bytes, at: start + 1, size: size)
                start += 1 + size
            }
            return (marker >> 4, length, start)
        }

        func string(reference: Int) -> String? {
            guard let offset = offset(of: reference), let (kind, length, start) = header(at: offset) else { return nil }
            switch kind {
            case 0x5:  // ASCII
                guard start + length <= table else { return nil }
                return String(decoding: bytes[start ..< start + length], as: UTF8.self)
            case 0x6:  // UTF-16, big-endian
                guard start + 2 * length <= table else { return nil }
                let units = (0 ..< length).map { UInt16(bytes[start + 2 * $0]) << 8 | UInt16(bytes[start + 2 * $0 + 1]) }
                return String(decoding: units, as: UTF16.self)
            default:
                return nil
            }
        }

        func string(_ key: String) -> String? {
            guard let offset = offset(of: top), let (kind, length, start) = header(at: offset), kind == 0xD,
                  start + 2 * length * referenceSize <= table else { return nil }
            for i in 0 ..< length {
                let keyReference = Binary.integer(bytes, at: start + i * referenceSize, size: referenceSize)
                guard string(reference: keyReference) == key else { continue }
                let valueReference = Binary.integer(bytes, at: start + (length + i) * referenceSize, size: referenceSize)
                return string(reference: valueReference)
            }
            return nil
        }
    }
}

extension String {
    /// `self` with every `target` replaced by `replacement` (without Foundation).
    func replacingAll(_ target: String, _ replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var result = ""
        var rest = self[...]
        while let range = rest.firstRange(of: target) {
            result += rest[..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        return result + rest
    }
}
