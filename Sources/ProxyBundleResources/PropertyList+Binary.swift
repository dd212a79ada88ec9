extension PropertyList {
    /// A `bplist00`: a header, objects, a table of their offsets, and a 32-byte trailer (the
    /// sizes of an offset and of a reference, the number of objects, the top one, the table's
    /// offset). As in CoreFoundation, every object reachable from the top must be well formed,
    /// its bytes before the table, or nothing is read; a shared object is read once.
    struct Binary {
        let bytes: [UInt8]
        let offsetSize: Int
        let referenceSize: Int
        let count: Int
        let top: Int
        /// Where the offset table starts: objects end before it.
        let table: Int
        /// Objects read, by offset.
        var read: [Int: Value] = [:]
        /// The containers being read, by offset: one met again is a cycle.
        var path: Set<Int> = []

        init?(bytes: [UInt8]) {
            let trailer = bytes.count - 32
            guard trailer >= 9 else { return nil }
            self.bytes = bytes
            offsetSize = Int(bytes[trailer + 6])
            referenceSize = Int(bytes[trailer + 7])
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize),
                  let count = Binary.unsigned(bytes, at: trailer + 8, size: 8, end: bytes.count).flatMap(Int.init(exactly:)),
                  let top = Binary.unsigned(bytes, at: trailer + 16, size: 8, end: bytes.count).flatMap(Int.init(exactly:)),
                  let table = Binary.unsigned(bytes, at: trailer + 24, size: 8, end: bytes.count).flatMap(Int.init(exactly:)),
                  count > 0, top < count, table >= 9, table <= trailer, count <= (trailer - table) / offsetSize
            else { return nil }
            (self.count, self.top, self.table) = (count, top, table)
        }

        /// The big-endian unsigned integer of `size` bytes at `offset`, all before `end`; of
        /// more than 8 bytes, the last 8 count.
        static func unsigned(_ bytes: [UInt8], at offset: Int, size: Int, end: Int) -> UInt64? {
            guard offset >= 0, size > 0, end <= bytes.count, size <= end - offset else { return nil }
            return bytes[max(offset, offset + size - 8) ..< offset + size].reduce(0) { $0 << 8 | UInt64($1) }
        }

        mutating func root() -> Value? { value(reference: top, depth: 0) }

        /// The object of `reference`; nil when it, or anything in it, is malformed.
        mutating func value(reference: Int, depth: Int) -> Value? {
            guard depth <= PropertyList.maxDepth, reference >= 0, reference < count,
                  let found = Binary.unsigned(bytes, at: table + reference * offsetSize, size: offsetSize, end: table + count * offsetSize),
                  found >= 8, found < table else { return nil }
            let offset = Int(found)
            if let value = read[offset] { return value }
            guard !path.contains(offset) else { return nil }
            let marker = bytes[offset]
            let low = Int(marker & 0x0F)
            var value: Value
            switch marker >> 4 {
            case 0x0:  // null, false, true
                guard [0x00, 0x08, 0x09].contains(marker) else { return nil }
                value = marker == 0x00 ? .other : .boolean(marker == 0x09)
            case 0x1:  // 2^low bytes; of 1, 2 or 4 unsigned, of 8 signed, of 16 the last 8 unsigned
                guard low <= 4, let raw = Binary.unsigned(bytes, at: offset + 1, size: 1 << low, end: table) else { return nil }
                value = low == 3 ? .integer(Int(truncatingIfNeeded: raw)) : Int(exactly: raw).map(Value.integer) ?? .other
            case 0x2:  // a float or a double
                guard low == 2 || low == 3, let raw = Binary.unsigned(bytes, at: offset + 1, size: 1 << low, end: table) else { return nil }
                value = .real(low == 2 ? Double(Float(bitPattern: UInt32(truncatingIfNeeded: raw))) : Double(bitPattern: raw))
            case 0x3:  // a date: a double
                guard marker == 0x33, Binary.unsigned(bytes, at: offset + 1, size: 8, end: table) != nil else { return nil }
                value = .date
            case 0x8:  // a keyed archiver's UID: low + 1 bytes, a 32-bit value
                guard let raw = Binary.unsigned(bytes, at: offset + 1, size: low + 1, end: table), raw <= UInt32.max else { return nil }
                value = .other
            case 0x4, 0x5, 0x6, 0xA, 0xC, 0xD:
                guard let (length, start) = length(low, at: offset + 1) else { return nil }
                let unit = [0x4: 1, 0x5: 1, 0x6: 2, 0xA: referenceSize, 0xC: referenceSize, 0xD: 2 * referenceSize][marker >> 4] ?? 1
                guard length <= (table - start) / unit else { return nil }
                let contents = bytes[start ..< start + length * unit]
                switch marker >> 4 {
                case 0x4: value = .data
                case 0x5:  // ASCII; a byte over 0x7F is taken for Latin-1, as swift-corelibs' CoreFoundation does
                    value = .string(String(contents.map { Character(Unicode.Scalar($0)) }))
                case 0x6:  // UTF-16, big-endian
                    let units = stride(from: start, to: start + 2 * length, by: 2).map { UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]) }
                    value = .string(String(decoding: units, as: UTF16.self))
                default:  // references: an array's or a set's values; a dictionary's keys, then its values
                    path.insert(offset)
                    defer { path.remove(offset) }
                    var values: [Value] = []
                    for position in stride(from: start, to: start + length * unit, by: referenceSize) {
                        guard let reference = Binary.unsigned(bytes, at: position, size: referenceSize, end: table)
                                .flatMap(Int.init(exactly:)),
                              let element = self.value(reference: reference, depth: depth + 1) else { return nil }
                        values.append(element)
                    }
                    value = marker >> 4 == 0xA ? .array(values) : .other
                    if marker >> 4 == 0xD {
                        var dictionary: [String: Value] = [:]
                        for (key, element) in zip(values.prefix(length), values.dropFirst(length)) {
                            switch key {
                            case .string(let key): if dictionary[key] == nil { dictionary[key] = element }  // the first wins
                            case .array, .dictionary, .other: return nil  // CoreFoundation takes no collection for a key
                            default: continue  // a number, a date...: a key no lookup by name finds
                            }
                        }
                        value = .dictionary(dictionary)
                    }
                }
            default:
                return nil
            }
            read[offset] = value
            return value
        }

        /// The length of an object of variable size, and where its contents start: the low
        /// nibble of its marker, or when that is 0xF, an integer object that follows.
        func length(_ low: Int, at start: Int) -> (length: Int, start: Int)? {
            guard low == 0xF else { return (low, start) }
            guard start < table, bytes[start] >> 4 == 0x1, bytes[start] & 0x0F <= 4 else { return nil }
            let size = 1 << Int(bytes[start] & 0x0F)
            guard let length = Binary.unsigned(bytes, at: start + 1, size: size, end: table).flatMap(Int.init(exactly:)) else { return nil }
            return (length, start + 1 + size)
        }
    }
}
