#if canImport(Glibc)
import Glibc
#endif

/// The names of one real directory found by their keys (see `CaseFold`), for a mount that
/// folds names: every spelling in one buffer, and an open-addressing index of the keys'
/// hashes, as `EntryList` keeps a listing. A name of ASCII only (nearly all) is its own key
/// once A-Z are lowered, so its key is neither made nor kept: it is hashed and compared
/// lowered on the fly. Any other name is folded once, when it is added, and its key kept
/// after it only where lowering the name does not give it.
///
/// About 12 bytes a name beside its bytes (8 an entry, 2 a slot), where a dictionary from key
/// to spelling took an array for each (often two) and a bucket: about 130. Several spellings of one key (`Data`
/// beside `data`) are several entries; `first(of:)` takes the first in byte order.
///
/// Entry numbers follow the order names were added: a table made from a listing
/// (`init(_:)`) numbers its names as the listing does.
struct SpellingTable: Sendable {
    private struct Entry {
        /// Where the spelling starts in `bytes`.
        var start: UInt32
        /// The high bits of the key's hash: most slots that are not the key's are passed over
        /// without reading a name.
        var tag: UInt16
        /// The spelling's length (at most 255).
        var length: UInt8
        /// Whether the key follows the spelling (two bytes of length, then the key), rather
        /// than being the spelling lowered.
        var keptKey: Bool
    }

    private var bytes: [UInt8] = []
    private var entries: [Entry] = []
    /// An entry's number plus one, 0 for an empty slot; at most three quarters full. Two
    /// bytes a slot (`narrow`) while the table has fewer than 65,535 names, as nearly every
    /// directory has; four (`wide`) past that.
    private var narrow: [UInt16] = []
    private var wide: [UInt32] = []
    private var slotCount: Int { wide.isEmpty ? narrow.count : wide.count }
    private static let narrowLimit = Int(UInt16.max)

    var count: Int { entries.count }

    init() {}

    /// An empty table with room for `count` names of `nameBytes` bytes in all.
    init(capacity count: Int, nameBytes: Int) {
        bytes.reserveCapacity(nameBytes)
        entries.reserveCapacity(count)
        sizeSlots(for: count)
    }

    /// The names of `list`, in its order (entry `i` is the list's entry `i`).
    init(_ list: EntryList) {
        // the list's names end with a NUL each, these not
        self.init(capacity: list.entries.count, nameBytes: list.nameBytes - list.entries.count)
        list.withNames { names in
            for entry in list.entries { add(names.name(entry)) }
        }
    }

    /// Adds the spelling `name` (at most 255 bytes; a longer one is left out, as no
    /// directory holds it).
    mutating func add(_ name: UnsafeRawBufferPointer) {
        guard name.count <= 255, bytes.count < Int(UInt32.max) - 2048 else { return }
        let start = UInt32(bytes.count)
        bytes.append(contentsOf: name)
        let hash: UInt64
        var keptKey = false
        if FoldedKey.isASCII(name) {
            hash = NameHash.hash(name, lowering: true)
        } else {
            let key = CaseFold.key(Array(name))
            hash = key.withUnsafeBytes { NameHash.hash($0, lowering: false) }
            keptKey = !key.withUnsafeBytes { FoldedKey.equal(stored: name, lowered: true, key: $0, lowered: false) }
            if keptKey {
                bytes.append(UInt8(truncatingIfNeeded: key.count))
                bytes.append(UInt8(truncatingIfNeeded: key.count >> 8))
                bytes.append(contentsOf: key)
            }
        }
        entries.append(Entry(start: start, tag: UInt16(truncatingIfNeeded: hash >> 48), length: UInt8(name.count),
                             keptKey: keptKey))
        if entries.count * 4 > slotCount * 3 || (wide.isEmpty && entries.count >= SpellingTable.narrowLimit) {
            sizeSlots(for: entries.count * 2)
        } else {
            place(entries.count, hash)
        }
    }

    mutating func add(_ name: [UInt8]) {
        name.withUnsafeBytes { add($0) }
    }

    /// The table with no spare capacity: kept for long, it should not hold what growing
    /// reserved. A table made from a listing has none: it is kept as it is, not copied.
    func compacted() -> SpellingTable {
        if bytes.capacity - bytes.count <= 64 && entries.capacity - entries.count <= 8
            && slotCount == SpellingTable.slotCount(for: entries.count) { return self }
        var copy = SpellingTable()
        copy.bytes = bytes.withUnsafeBufferPointer { Array($0) }
        copy.entries = entries.withUnsafeBufferPointer { Array($0) }
        (copy.narrow, copy.wide) = (narrow, wide)
        copy.sizeSlots(for: count)
        return copy
    }

    /// The spelling of entry `index`.
    func withSpelling<T>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let entry = entries[index]
        return bytes.withUnsafeBytes { raw in
            body(UnsafeRawBufferPointer(rebasing: raw[Int(entry.start) ..< Int(entry.start) + Int(entry.length)]))
        }
    }

    /// The first spelling in byte order of `name`'s key; `name` itself (its array shared) when
    /// that is how the directory spells it; nil when the directory has no spelling of it.
    func first(of name: [UInt8]) -> [UInt8]? {
        guard let index = firstEntry(of: name) else { return nil }
        return withSpelling(index) { spelling in spelling.elementsEqual(name) ? name : Array(spelling) }
    }

    /// Every spelling of `name`'s key, in byte order.
    func all(of name: [UInt8]) -> [[UInt8]] {
        var found: [[UInt8]] = []
        withKey(of: name) { key, lowered in
            forEachEntry(key, lowered) { index in found.append(withSpelling(index) { Array($0) }) }
        }
        return found.count > 1 ? found.sorted { $0.lexicographicallyPrecedes($1) } : found
    }

    /// The number of the entry that spells `name`'s key first in byte order.
    func firstEntry(of name: [UInt8]) -> Int? {
        withKey(of: name) { key, lowered in firstEntry(key, lowered) }
    }

    /// Of the entries whose key is entry `index`'s, but those `skip` passes over, the one first
    /// in byte order, of two equal spellings the first added (`index` itself when it is the
    /// only one).
    func firstEntry(keyOf index: Int, skipping skip: (Int) -> Bool = { _ in false }) -> Int? {
        withKey(ofEntry: index) { key, lowered in firstEntry(key, lowered, skipping: skip) }
    }

    /// Whether the table has a spelling of the key of entry `index` of `other`.
    func contains(keyOf index: Int, in other: SpellingTable) -> Bool {
        guard !entries.isEmpty else { return false }
        return other.withKey(ofEntry: index) { key, lowered in
            var found = false
            forEachEntry(key, lowered) { _ in found = true }
            return found
        }
    }

    /// Adds entry `index` of `other`.
    mutating func add(entry index: Int, of other: SpellingTable) {
        other.withSpelling(index) { add($0) }
    }

    // MARK: keys

    /// Runs `body` with the key of `name` and whether it is to be lowered (an ASCII name,
    /// given as it is): one fold for any other name, nothing allocated for an ASCII one.
    private func withKey<T>(of name: [UInt8], _ body: (UnsafeRawBufferPointer, Bool) -> T) -> T {
        name.withUnsafeBytes { raw in
            if FoldedKey.isASCII(raw) { return body(raw, true) }
            return CaseFold.key(name).withUnsafeBytes { body($0, false) }
        }
    }

    /// The same for the key of entry `index`.
    private func withKey<T>(ofEntry index: Int, _ body: (UnsafeRawBufferPointer, Bool) -> T) -> T {
        let entry = entries[index]
        return bytes.withUnsafeBytes { raw in
            if entry.keptKey {
                let at = Int(entry.start) + Int(entry.length)
                let count = Int(raw[at]) | Int(raw[at + 1]) << 8
                return body(UnsafeRawBufferPointer(rebasing: raw[at + 2 ..< at + 2 + count]), false)
            }
            let spelling = UnsafeRawBufferPointer(rebasing: raw[Int(entry.start) ..< Int(entry.start) + Int(entry.length)])
            return body(spelling, true)
        }
    }

    private func firstEntry(_ key: UnsafeRawBufferPointer, _ lowered: Bool,
                            skipping skip: (Int) -> Bool = { _ in false }) -> Int? {
        var best: Int? = nil
        forEachEntry(key, lowered) { index in
            if skip(index) { return }
            guard let known = best else { return best = index }
            let precedes = withSpelling(index) { a in
                withSpelling(known) { b in a.lexicographicallyPrecedes(b) || (a.elementsEqual(b) && index < known) }
            }
            if precedes { best = index }
        }
        return best
    }

    /// Calls `body` with the number of each entry whose key is `key` (to be lowered first
    /// where `lowered`).
    private func forEachEntry(_ key: UnsafeRawBufferPointer, _ lowered: Bool, _ body: (Int) -> Void) {
        guard slotCount > 0 else { return }
        let hash = NameHash.hash(key, lowering: lowered)
        let tag = UInt16(truncatingIfNeeded: hash >> 48)
        let mask = slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        bytes.withUnsafeBytes { raw in
            while self[slot] != 0 {
                let index = self[slot] - 1
                let entry = entries[index]
                if entry.tag == tag && matches(entry, raw, key, lowered) { body(index) }
                slot = (slot + 1) & mask
            }
        }
    }

    private func matches(_ entry: Entry, _ raw: UnsafeRawBufferPointer, _ key: UnsafeRawBufferPointer, _ lowered: Bool) -> Bool {
        if entry.keptKey {
            let at = Int(entry.start) + Int(entry.length)
            let count = Int(raw[at]) | Int(raw[at + 1]) << 8
            return FoldedKey.equal(stored: UnsafeRawBufferPointer(rebasing: raw[at + 2 ..< at + 2 + count]), lowered: false,
                                   key: key, lowered: lowered)
        }
        let spelling = UnsafeRawBufferPointer(rebasing: raw[Int(entry.start) ..< Int(entry.start) + Int(entry.length)])
        return FoldedKey.equal(stored: spelling, lowered: true, key: key, lowered: lowered)
    }

    // MARK: index

    /// The fewest slots, a power of two, that `count` entries fill at most three quarters of.
    private static func slotCount(for count: Int) -> Int {
        var size = 16
        while size * 3 < count * 4 { size *= 2 }
        return size
    }

    private mutating func sizeSlots(for count: Int) {
        let size = SpellingTable.slotCount(for: count)
        let isWide = Swift.max(count, entries.count) >= SpellingTable.narrowLimit
        guard size != slotCount || isWide == wide.isEmpty else { return }
        narrow = isWide ? [] : Array(repeating: 0, count: size)
        wide = isWide ? Array(repeating: 0, count: size) : []
        for index in entries.indices {
            let hash = withKey(ofEntry: index) { key, lowered in NameHash.hash(key, lowering: lowered) }
            place(index + 1, hash)
        }
    }

    /// The entry number plus one in slot `slot`, 0 when it is empty.
    private subscript(slot: Int) -> Int {
        wide.isEmpty ? Int(narrow[slot]) : Int(wide[slot])
    }

    private mutating func place(_ number: Int, _ hash: UInt64) {
        let mask = slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        while self[slot] != 0 { slot = (slot + 1) & mask }
        if wide.isEmpty { narrow[slot] = UInt16(number) } else { wide[slot] = UInt32(number) }
    }
}

/// Comparing keys given as ASCII names still to be lowered, or as keys (hashed by `NameHash`).
enum FoldedKey {
    /// Whether every byte of `name` is ASCII.
    static func isASCII(_ name: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        var any: UInt64 = 0
        while offset + 8 <= name.count {
            any |= name.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < name.count {
            any |= UInt64(name[offset])
            offset += 1
        }
        return any & 0x8080_8080_8080_8080 == 0
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        (byte &- 0x41) < 26 ? byte | 0x20 : byte
    }

    /// Whether `stored` and `key` are one key, each lowered first where told.
    static func equal(stored: UnsafeRawBufferPointer, lowered a: Bool, key: UnsafeRawBufferPointer, lowered b: Bool) -> Bool {
        guard stored.count == key.count else { return false }
        for index in 0 ..< stored.count {
            let x = a ? lower(stored[index]) : stored[index]
            let y = b ? lower(key[index]) : key[index]
            if x != y { return false }
        }
        return true
    }
}
