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
/// One allocation a table (`storage`: a header, the index's slots, each entry's start, each
/// entry's length, then the names): about 8 bytes a name beside its bytes (4 for where it
/// starts, 1 for its length, about 3 of slots) and about 70 a table, where four arrays took
/// about 120 more a table, and a dictionary from key to spelling an array for each name and
/// a bucket, about 130 a name. A probe compares lengths first, from their own small region, and reads a
/// name's bytes only when the length is the key's. Several spellings of one key (`Data`
/// beside `data`) are several entries; `first(of:)` takes the first in byte order.
///
/// Entry numbers follow the order names were added: a table made from a listing
/// (`init(_:)`) numbers its names as the listing does.
struct SpellingTable: Sendable {
    /// Empty for a table with room for nothing; otherwise `Header.words` words of header,
    /// then the slots (an entry's number plus one, 0 for an empty slot; at most three
    /// quarters full; two bytes a slot while the table has room for fewer than 65,535 names,
    /// as nearly every directory has, four past that), one word an entry (where its spelling
    /// starts among the names, with `keptKey` set where its key follows it: two bytes of
    /// length, then the key), one byte an entry (its spelling's length, at most 255), and
    /// the names. Regions are sized for `capacity` entries and `nameCapacity` bytes.
    private var storage: [UInt32] = []
    private static let keptKey: UInt32 = 1 << 31
    private static let narrowLimit = Int(UInt16.max)

    /// The header's words, in order.
    private enum Header: Int {
        case count, nameBytes, capacity, nameCapacity, slotCount, wide
        /// 1 once two entries share a key (`Data` beside `data`), else 0.
        case sharesKeys
        static let words = 7
    }

    /// Where each region starts, in bytes, for a table of this shape.
    private struct Layout {
        let count: Int
        let nameBytes: Int
        let capacity: Int
        let nameCapacity: Int
        let slotCount: Int
        let wide: Bool
        var slots: Int { Header.words * 4 }
        var starts: Int { slots + (wide ? 4 * slotCount : 2 * slotCount + 2 * (slotCount & 1)) }
        var lengths: Int { starts + 4 * capacity }
        var names: Int { lengths + (capacity + 3) & ~3 }
        var words: Int { (names + nameCapacity + 3) / 4 }
    }

    private var layout: Layout {
        guard !storage.isEmpty else { return Layout(count: 0, nameBytes: 0, capacity: 0, nameCapacity: 0, slotCount: 0, wide: false) }
        return Layout(count: Int(storage[Header.count.rawValue]), nameBytes: Int(storage[Header.nameBytes.rawValue]),
                      capacity: Int(storage[Header.capacity.rawValue]), nameCapacity: Int(storage[Header.nameCapacity.rawValue]),
                      slotCount: Int(storage[Header.slotCount.rawValue]), wide: storage[Header.wide.rawValue] != 0)
    }

    var count: Int { storage.isEmpty ? 0 : Int(storage[Header.count.rawValue]) }

    /// Whether two entries share a key: until then each entry is the only spelling of its key,
    /// and a merged listing asks no probe of the table to know that it serves.
    var sharesKeys: Bool { !storage.isEmpty && storage[Header.sharesKeys.rawValue] != 0 }

    init() {}

    /// An empty table with room for `count` names of `nameBytes` bytes in all; where `sparse`,
    /// its index is sized for twice as many, at most three eighths full, so that a probe for a
    /// key it lacks passes over about 2 slots rather than about 10 (for a table made, probed
    /// and dropped while one listing is merged).
    init(capacity count: Int, nameBytes: Int, sparse: Bool = false) {
        resize(capacity: count, nameCapacity: nameBytes, slotsFor: sparse ? 2 * count : count)
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
        guard name.count <= 255 else { return }
        let hash: UInt64
        var key: [UInt8]? = nil
        if FoldedKey.isASCII(name) {
            hash = NameHash.hash(name, lowering: true)
        } else {
            let folded = CaseFold.key(Array(name))
            hash = folded.withUnsafeBytes { NameHash.hash($0, lowering: false) }
            if !folded.withUnsafeBytes({ FoldedKey.equal(stored: name, lowered: true, key: $0, lowered: false) }) { key = folded }
        }
        let needed = name.count + (key.map { 2 + $0.count } ?? 0)
        var shape = layout
        guard shape.nameBytes + needed < Int(SpellingTable.keptKey) - 2048 else { return }
        if shape.count == shape.capacity || shape.nameBytes + needed > shape.nameCapacity {
            resize(capacity: Swift.max(shape.count + 1, 2 * shape.capacity, 8),
                   nameCapacity: Swift.max(shape.nameBytes + needed, 2 * shape.nameCapacity, 64))
            shape = layout
        }
        let index = shape.count
        storage.withUnsafeMutableBytes { raw in
            var at = shape.names + shape.nameBytes
            UnsafeMutableRawBufferPointer(rebasing: raw[at ..< at + name.count]).copyMemory(from: name)
            at += name.count
            if let key {
                raw[at] = UInt8(truncatingIfNeeded: key.count)
                raw[at + 1] = UInt8(truncatingIfNeeded: key.count >> 8)
                key.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: raw[at + 2 ..< at + 2 + key.count]).copyMemory(from: $0) }
            }
            let start = UInt32(shape.nameBytes)
            raw.storeBytes(of: key != nil ? start | SpellingTable.keptKey : start, toByteOffset: shape.starts + 4 * index, as: UInt32.self)
            raw[shape.lengths + index] = UInt8(name.count)
        }
        storage[Header.count.rawValue] = UInt32(index + 1)
        storage[Header.nameBytes.rawValue] = UInt32(shape.nameBytes + needed)
        let checking = storage[Header.sharesKeys.rawValue] == 0
        if storage.withUnsafeMutableBytes({ raw in SpellingTable.place(index + 1, hash, raw, shape, checking: checking) }) {
            storage[Header.sharesKeys.rawValue] = 1
        }
    }

    mutating func add(_ name: [UInt8]) {
        name.withUnsafeBytes { add($0) }
    }

    /// The table with no spare room: kept for long, it should not hold what growing reserved.
    /// A table made from a listing of ASCII names has none: it is kept as it is, not copied.
    func compacted() -> SpellingTable {
        let shape = layout
        if storage.isEmpty || shape.capacity == shape.count && shape.nameCapacity - shape.nameBytes < 4
            && shape.slotCount == SpellingTable.slotCount(for: shape.count) { return self }
        var copy = self
        copy.resize(capacity: shape.count, nameCapacity: shape.nameBytes)
        return copy
    }

    /// Gives the table room for `capacity` entries and `nameCapacity` bytes of names, its
    /// index sized for them.
    private mutating func resize(capacity: Int, nameCapacity: Int, slotsFor: Int = 0) {
        let old = layout
        guard capacity > 0 || old.count > 0 else { return storage = [] }
        let slotCount = SpellingTable.slotCount(for: Swift.max(capacity, slotsFor))
        let shape = Layout(count: old.count, nameBytes: old.nameBytes, capacity: capacity, nameCapacity: (nameCapacity + 3) & ~3,
                           slotCount: slotCount, wide: capacity >= SpellingTable.narrowLimit)
        var made = [UInt32](repeating: 0, count: shape.words)
        made[Header.count.rawValue] = UInt32(shape.count)
        made[Header.nameBytes.rawValue] = UInt32(shape.nameBytes)
        made[Header.capacity.rawValue] = UInt32(shape.capacity)
        made[Header.nameCapacity.rawValue] = UInt32(shape.nameCapacity)
        made[Header.slotCount.rawValue] = UInt32(shape.slotCount)
        made[Header.wide.rawValue] = shape.wide ? 1 : 0
        made[Header.sharesKeys.rawValue] = sharesKeys ? 1 : 0
        storage.withUnsafeBytes { from in
            made.withUnsafeMutableBytes { to in
                guard old.count > 0 else { return }
                func copy(_ count: Int, from source: Int, to target: Int) {
                    UnsafeMutableRawBufferPointer(rebasing: to[target ..< target + count])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: from[source ..< source + count]))
                }
                copy(4 * old.count, from: old.starts, to: shape.starts)
                copy(old.count, from: old.lengths, to: shape.lengths)
                copy(old.nameBytes, from: old.names, to: shape.names)
                for index in 0 ..< old.count {
                    let hash = SpellingTable.withKey(ofEntry: index, UnsafeRawBufferPointer(to), shape) { key, lowered in
                        NameHash.hash(key, lowering: lowered)
                    }
                    SpellingTable.place(index + 1, hash, to, shape)
                }
            }
        }
        storage = made
    }

    /// The spelling of entry `index`.
    func withSpelling<T>(_ index: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let shape = layout
        return storage.withUnsafeBytes { body(SpellingTable.spelling(index, $0, shape)) }
    }

    /// Entry `index`'s start word in `raw`, the bytes of `storage`.
    private static func start(_ index: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout) -> UInt32 {
        raw.load(fromByteOffset: shape.starts + 4 * index, as: UInt32.self)
    }

    /// Entry `index`'s spelling in `raw`, the bytes of `storage`.
    private static func spelling(_ index: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout) -> UnsafeRawBufferPointer {
        let at = shape.names + Int(start(index, raw, shape) & ~keptKey)
        return UnsafeRawBufferPointer(rebasing: raw[at ..< at + Int(raw[shape.lengths + index])])
    }

    /// Entry `index`'s kept key in `raw`, nil when its key is its spelling lowered.
    private static func keptKey(_ index: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout) -> UnsafeRawBufferPointer? {
        let word = start(index, raw, shape)
        guard word & keptKey != 0 else { return nil }
        let at = shape.names + Int(word & ~keptKey) + Int(raw[shape.lengths + index])
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
        guard sharesKeys else { return skip(index) ? nil : index }
        return withKey(ofEntry: index) { key, lowered in firstEntry(key, lowered, skipping: skip) }
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
        let shape = layout
        return storage.withUnsafeBytes { SpellingTable.withKey(ofEntry: index, $0, shape, body) }
    }

    private static func withKey<T>(ofEntry index: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout,
                                   _ body: (UnsafeRawBufferPointer, Bool) -> T) -> T {
        if let key = keptKey(index, raw, shape) { return body(key, false) }
        return body(spelling(index, raw, shape), true)
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
        let shape = layout
        guard shape.count > 0 else { return }
        let hash = NameHash.hash(key, lowering: lowered)
        let mask = shape.slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        storage.withUnsafeBytes { raw in
            var number = SpellingTable.slot(slot, raw, shape)
            while number != 0 {
                if SpellingTable.matches(number - 1, raw, shape, key, lowered) { body(number - 1) }
                slot = (slot + 1) & mask
                number = SpellingTable.slot(slot, raw, shape)
            }
        }
    }

    /// Whether entry `index`'s key is `key`: an entry whose key is its spelling lowered is
    /// passed over by its length alone unless that is the key's.
    private static func matches(_ index: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout,
                                _ key: UnsafeRawBufferPointer, _ lowered: Bool) -> Bool {
        if start(index, raw, shape) & keptKey == 0 {
            return Int(raw[shape.lengths + index]) == key.count
                && FoldedKey.equal(stored: spelling(index, raw, shape), lowered: true, key: key, lowered: lowered)
        }
        return keptKey(index, raw, shape).map { FoldedKey.equal(stored: $0, lowered: false, key: key, lowered: lowered) } ?? false
    }

    // MARK: index

    /// The fewest slots, a power of two, that `count` entries fill at most three quarters of.
    private static func slotCount(for count: Int) -> Int {
        var size = 16
        while size * 3 < count * 4 { size *= 2 }
        return size
    }

    /// The entry number plus one in slot `slot`, 0 when it is empty.
    private static func slot(_ slot: Int, _ raw: UnsafeRawBufferPointer, _ shape: Layout) -> Int {
        shape.wide ? Int(raw.load(fromByteOffset: shape.slots + 4 * slot, as: UInt32.self))
            : Int(raw.load(fromByteOffset: shape.slots + 2 * slot, as: UInt16.self))
    }

    /// Puts entry number `number` (its index plus one) in the first free slot from `hash`;
    /// where `checking`, tells whether an entry placed before has its key (every entry of
    /// one key lies on the run of full slots that its hash starts).
    @discardableResult
    private static func place(_ number: Int, _ hash: UInt64, _ raw: UnsafeMutableRawBufferPointer, _ shape: Layout,
                              checking: Bool = false) -> Bool {
        let mask = shape.slotCount - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        let read = UnsafeRawBufferPointer(raw)
        var shared = false
        while true {
            let other = self.slot(slot, read, shape)
            if other == 0 { break }
            if checking && !shared {
                shared = withKey(ofEntry: number - 1, read, shape) { key, lowered in matches(other - 1, read, shape, key, lowered) }
            }
            slot = (slot + 1) & mask
        }
        if shape.wide {
            raw.storeBytes(of: UInt32(number), toByteOffset: shape.slots + 4 * slot, as: UInt32.self)
        } else {
            raw.storeBytes(of: UInt16(number), toByteOffset: shape.slots + 2 * slot, as: UInt16.self)
        }
        return shared
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
