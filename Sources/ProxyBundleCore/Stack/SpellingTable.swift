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
/// About 8 bytes a name beside its bytes (4 for where it starts, 1 for its length, about 3 of
/// slots), where a dictionary from key to spelling took an array for each (often two) and a
/// bucket: about 130. A probe compares lengths first, from their own small array, and reads a
/// name's bytes only when the length is the key's. Several spellings of one key (`Data`
/// beside `data`) are several entries; `first(of:)` takes the first in byte order.
///
/// Entry numbers follow the order names were added: a table made from a listing
/// (`init(_:)`) numbers its names as the listing does.
struct SpellingTable: Sendable {
    private var bytes: [UInt8] = []
    /// Where each entry's spelling starts in `bytes`, with `keptKey` set where its key follows
    /// it (two bytes of length, then the key) rather than being the spelling lowered.
    private var starts: [UInt32] = []
    /// Each entry's spelling's length (at most 255).
    private var lengths: [UInt8] = []
    private static let keptKey: UInt32 = 1 << 31
    /// An entry's number plus one, 0 for an empty slot; at most three quarters full. Two
    /// bytes a slot (`narrow`) while the table has fewer than 65,535 names, as nearly every
    /// directory has; four (`wide`) past that.
    private var narrow: [UInt16] = []
    private var wide: [UInt32] = []
    private var slotCount: Int { wide.isEmpty ? narrow.count : wide.count }
    private static let narrowLimit = Int(UInt16.max)

    var count: Int { starts.count }

    init() {}

    /// An empty table with room for `count` names of `nameBytes` bytes in all.
    init(capacity count: Int, nameBytes: Int) {
        bytes.reserveCapacity(nameBytes)
        starts.reserveCapacity(count)
        lengths.reserveCapacity(count)
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
        guard name.count <= 255, bytes.count < Int(SpellingTable.keptKey) - 2048 else { return }
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
        starts.append(keptKey ? start | SpellingTable.keptKey : start)
        lengths.append(UInt8(name.count))
        if count * 4 > slotCount * 3 || (wide.isEmpty && count >= SpellingTable.narrowLimit) {
            sizeSlots(for: count * 2)
        } else {
            place(count, hash)
        }
    }

    mutating func add(_ name: [UInt8]) {
        name.withUnsafeBytes { add($0) }
    }

    /// The table with no spare capacity: kept for long, it should not hold what growing
    /// reserved. A table made from a listing has none: it is kept as it is, not copied.
    func compacted() -> SpellingTable {
        if bytes.capacity - bytes.count <= 64 && starts.capacity - count <= 8
            && slotCount == SpellingTable.slotCount(for: count) { return self }
        var copy = SpellingTable()
        copy.bytes = bytes.withUnsafeBufferPointer { Array($0) }
        copy.starts = starts.withUnsafeBufferPointer { Array($0) }
        copy.lengths = lengths.withUnsafeBufferPointer { Array($0) }
        (copy.narrow, copy.wide) = (narrow, wide)
        copy.sizeSlots(for: count)
        return copy
    }

    /// The spelling of entry `index`.
    func withSpelling<T>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        bytes.withUnsafeBytes { body(spelling(index, $0)) }
    }

    /// Entry `index`'s spelling in `raw`, the bytes of `bytes`.
    private func spelling(_ index: Int, _ raw: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let start = Int(starts[index] & ~SpellingTable.keptKey)
        return UnsafeRawBufferPointer(rebasing: raw[start ..< start + Int(lengths[index])])
    }

    /// Entry `index`'s kept key in `raw`, nil when its key is its spelling lowered.
    private func keptKey(_ index: Int, _ raw: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard starts[index] & SpellingTable.keptKey != 0 else { return nil }
        let at = Int(starts[index] & ~SpellingTable.keptKey) + Int(lengths[index])
        let count = Int(raw[at]) | Int(raw[at + 1]) << 8
        return UnsafeRawBufferPointer(rebasing: raw[at + 2 ..< at + 2 + count])
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
        guard count > 0 else { return false }
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
        bytes.withUnsafeBytes { raw in
            if let key = keptKey(index, raw) { return body(key, false) }
            return body(spelling(index, raw), true)
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
        let mask = slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        bytes.withUnsafeBytes { raw in
            while self[slot] != 0 {
                let index = self[slot] - 1
                if matches(index, raw, key, lowered) { body(index) }
                slot = (slot + 1) & mask
            }
        }
    }

    /// Whether entry `index`'s key is `key`: an entry whose key is its spelling lowered is
    /// passed over by its length alone unless that is the key's.
    private func matches(_ index: Int, _ raw: UnsafeRawBufferPointer, _ key: UnsafeRawBufferPointer, _ lowered: Bool) -> Bool {
        if starts[index] & SpellingTable.keptKey == 0 {
            return Int(lengths[index]) == key.count && FoldedKey.equal(stored: spelling(index, raw), lowered: true, key: key, lowered: lowered)
        }
        return keptKey(index, raw).map { FoldedKey.equal(stored: $0, lowered: false, key: key, lowered: lowered) } ?? false
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
        let isWide = Swift.max(count, self.count) >= SpellingTable.narrowLimit
        guard size != slotCount || isWide == wide.isEmpty else { return }
        narrow = isWide ? [] : Array(repeating: 0, count: size)
        wide = isWide ? Array(repeating: 0, count: size) : []
        for index in starts.indices {
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

    /// Whether `stored` and `key` are one key, each lowered first where told: eight bytes at a
    /// time (names of one directory often share their length and a long prefix, so a probe
    /// of a table compares most of a name).
    static func equal(stored: UnsafeRawBufferPointer, lowered a: Bool, key: UnsafeRawBufferPointer, lowered b: Bool) -> Bool {
        let count = stored.count
        guard count == key.count else { return false }
        guard count >= 8 else {
            for index in 0 ..< count {
                let x = a ? lower(stored[index]) : stored[index]
                let y = b ? lower(key[index]) : key[index]
                if x != y { return false }
            }
            return true
        }
        @inline(__always) func same(at offset: Int) -> Bool {
            let x = stored.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            let y = key.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            return (a ? NameHash.lower(x) : x) == (b ? NameHash.lower(y) : y)
        }
        var offset = 0
        while offset + 8 <= count {
            if !same(at: offset) { return false }
            offset += 8
        }
        // the last eight bytes, overlapping the words compared where the count is not a multiple
        return offset == count || same(at: count - 8)
    }
}
