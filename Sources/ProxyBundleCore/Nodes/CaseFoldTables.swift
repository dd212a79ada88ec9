/// `CaseFoldTable`'s text decoded once, on the first name that is not ASCII: sorted code
/// points searched by halves. About 60 KB in all.
final class CaseFoldTables: Sendable {
    static let shared = CaseFoldTables()

    /// Ranges of code points of one combining class other than 0.
    private let classFirst: [UInt32]
    private let classLast: [UInt32]
    private let classValue: [UInt8]
    /// Ranges of Default_Ignorable_Code_Points, which fold to nothing (as in the kernel's tables).
    private let ignorableFirst: [UInt32]
    private let ignorableLast: [UInt32]
    private let decompositions: Mapping
    private let foldings: Mapping

    /// Code points mapped to sequences of them: `values[starts[i] ..< starts[i + 1]]` for
    /// `keys[i]`.
    struct Mapping: Sendable {
        var keys: [UInt32] = []
        var starts: [Int32] = [0]
        var values: [UInt32] = []

        init() {}

        /// The sequence of `code`, if it has one.
        func lookup(_ code: UInt32) -> ArraySlice<UInt32>? {
            guard let index = CaseFoldTables.search(keys, code), keys[index] == code else { return nil }
            return values[Int(starts[index]) ..< Int(starts[index + 1])]
        }
    }

    private init() {
        var first: [UInt32] = [], last: [UInt32] = [], value: [UInt8] = []
        CaseFoldTables.parse(CaseFoldTable.combiningClasses) { key, values in
            first.append(key)
            last.append(values[0])
            value.append(UInt8(truncatingIfNeeded: values[1]))
        }
        classFirst = first
        classLast = last
        classValue = value
        var ignorableFirst: [UInt32] = [], ignorableLast: [UInt32] = []
        CaseFoldTables.parse(CaseFoldTable.ignorables) { key, values in
            ignorableFirst.append(key)
            ignorableLast.append(values[0])
        }
        self.ignorableFirst = ignorableFirst
        self.ignorableLast = ignorableLast
        decompositions = CaseFoldTables.mapping(CaseFoldTable.decompositions)
        foldings = CaseFoldTables.mapping(CaseFoldTable.foldings)
    }

    private static func mapping(_ text: String) -> Mapping {
        var mapping = Mapping()
        parse(text) { key, values in
            mapping.keys.append(key)
            mapping.values += values
            mapping.starts.append(Int32(mapping.values.count))
        }
        return mapping
    }

    /// Calls `entry` for each `key:value,value;` of `text` (hexadecimal; line breaks ignored).
    private static func parse(_ text: String, _ entry: (UInt32, [UInt32]) -> Void) {
        var number: UInt32 = 0
        var key: UInt32? = nil
        var values: [UInt32] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): number = number << 4 | UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "A")...UInt8(ascii: "F"): number = number << 4 | UInt32(byte - UInt8(ascii: "A") + 10)
            case UInt8(ascii: ":"):
                key = number
                number = 0
            case UInt8(ascii: ","):
                values.append(number)
                number = 0
            case UInt8(ascii: ";"):
                values.append(number)
                if let key { entry(key, values) }
                key = nil
                values = []
                number = 0
            default: break
            }
        }
    }

    /// The index of the last element of sorted `keys` not above `code`.
    static func search(_ keys: [UInt32], _ code: UInt32) -> Int? {
        var low = 0, high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] <= code { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? nil : low - 1
    }

    func combiningClass(_ code: UInt32) -> UInt8 {
        guard code >= 0x300, let index = CaseFoldTables.search(classFirst, code), code <= classLast[index] else { return 0 }
        return classValue[index]
    }

    /// Whether `code` is a Default_Ignorable_Code_Point.
    func isIgnorable(_ code: UInt32) -> Bool {
        guard code >= 0xAD, let index = CaseFoldTables.search(ignorableFirst, code) else { return false }
        return code <= ignorableLast[index]
    }

    /// Appends the full canonical decomposition of `code` (Hangul syllables by their formula;
    /// `CaseFold.ignored` for an ignorable code point, which the kernel's tables decompose to
    /// nothing but with combining class 0: marks are not reordered across it).
    func appendDecomposition(of code: UInt32, to out: inout [UInt32]) {
        if code < 0xAD { return out.append(code) }
        if isIgnorable(code) { return out.append(CaseFold.ignored) }
        if code < 0xC0 { return out.append(code) }
        if (0xAC00...0xD7A3).contains(code) {
            let index = code - 0xAC00
            out += [0x1100 + index / 588, 0x1161 + index % 588 / 28]
            if index % 28 != 0 { out.append(0x11A7 + index % 28) }
            return
        }
        if let parts = decompositions.lookup(code) { out += parts } else { out.append(code) }
    }

    /// Appends the full case folding of `code`, decomposed, if it has one; whether it has.
    func appendOwnFolding(of code: UInt32, to out: inout [UInt32]) -> Bool {
        guard code >= 0x41, let parts = foldings.lookup(code) else { return false }
        out += parts
        return true
    }

    /// Appends the full case folding of `code`, decomposed.
    func appendFolding(of code: UInt32, to out: inout [UInt32]) {
        if code < 0x41 { return out.append(code) }
        if let parts = foldings.lookup(code) { out += parts } else { out.append(code) }
    }

    /// Puts `codes` in canonical order: each run of combining marks sorted by class, stably.
    func reorder(_ codes: inout [UInt32]) {
        guard codes.count > 1 else { return }
        for index in 1 ..< codes.count {
            let code = codes[index]
            let rank = combiningClass(code)
            guard rank != 0 else { continue }
            var place = index
            while place > 0, combiningClass(codes[place - 1]) > rank {
                codes[place] = codes[place - 1]
                place -= 1
            }
            codes[place] = code
        }
    }
}
