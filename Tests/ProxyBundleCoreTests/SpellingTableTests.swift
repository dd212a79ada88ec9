@testable import ProxyBundleCore
import XCTest

final class SpellingTableTests: XCTestCase {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    private func table(_ names: [[UInt8]]) -> SpellingTable {
        var table = SpellingTable()
        for name in names { table.add(name) }
        return table
    }

    /// A table knows once two of its names share a key; until then each entry is the first
    /// spelling of its own key without a probe (a merged listing asks that of every name), and
    /// after it the probe finds the first in byte order, through growth and compaction.
    func testATableKnowsWhetherTwoNamesShareAKey() {
        var t = SpellingTable()
        for i in 0 ..< 100 { t.add(bytes("name\(i)")) }
        XCTAssertFalse(t.sharesKeys)
        XCTAssertEqual(t.firstEntry(keyOf: 7), 7)
        XCTAssertNil(t.firstEntry(keyOf: 7, skipping: { $0 == 7 }))
        t.add(bytes("NAME7"))
        XCTAssertTrue(t.sharesKeys)
        XCTAssertEqual(t.firstEntry(keyOf: 7), 100)
        XCTAssertEqual(t.firstEntry(keyOf: 100), 100)
        XCTAssertEqual(t.firstEntry(keyOf: 7, skipping: { $0 == 100 }), 7)
        XCTAssertEqual(t.firstEntry(keyOf: 8), 8)
        for i in 0 ..< 1_000 { t.add(bytes("more\(i)")) }
        XCTAssertTrue(t.sharesKeys)
        XCTAssertEqual(t.compacted().firstEntry(keyOf: 7), 100)
        var folded = SpellingTable(capacity: 4, nameBytes: 16, sparse: true)
        folded.add(bytes("caf\u{E9}"))
        folded.add(bytes("cafe"))
        XCTAssertFalse(folded.sharesKeys)
        folded.add(bytes("CAF\u{C9}"))
        XCTAssertTrue(folded.sharesKeys)
        XCTAssertEqual(folded.firstEntry(keyOf: 0), 2)
        XCTAssertEqual(folded.firstEntry(keyOf: 1), 1)
    }

    /// `FoldedKey.equal` compares eight bytes at a time: it agrees with lowering A-Z byte by
    /// byte on names of every length up to 40, drawn from bytes at the edges of A-Z and a-z
    /// and above ASCII (so that most pairs share a length and many are one key), with either
    /// side lowered or taken as it is.
    func testKeysCompareAsTheirBytesLowered() {
        let alphabet: [UInt8] = [0x40, 0x41, 0x5A, 0x5B, 0x60, 0x61, 0x7A, 0x7B, 0x80, 0xC1, 0xE1, 0xFA]
        let lower = { (byte: UInt8) -> UInt8 in (0x41 ... 0x5A).contains(byte) ? byte | 0x20 : byte }
        var generator = SystemRandomNumberGenerator()
        var equalSeen = 0
        for _ in 0 ..< 20_000 {
            let count = Int.random(in: 0 ... 40, using: &generator)
            let a = (0 ..< count).map { _ in alphabet.randomElement(using: &generator)! }
            // b: a with a few bytes re-cased or changed, sometimes a length off by one
            var b = a.map { byte -> UInt8 in
                switch Int.random(in: 0 ..< 20, using: &generator) {
                case 0: return alphabet.randomElement(using: &generator)!
                case 1, 2: return (0x41 ... 0x5A).contains(byte) ? byte | 0x20 : (0x61 ... 0x7A).contains(byte) ? byte & ~0x20 : byte
                default: return byte
                }
            }
            if Int.random(in: 0 ..< 10, using: &generator) == 0 { b.append(0x61) }
            for (loweredA, loweredB) in [(true, true), (true, false), (false, true), (false, false)] {
                let x = loweredA ? a.map(lower) : a
                let y = loweredB ? b.map(lower) : b
                let expected = x == y
                if expected { equalSeen += 1 }
                let got = a.withUnsafeBytes { sa in
                    b.withUnsafeBytes { sb in FoldedKey.equal(stored: sa, lowered: loweredA, key: sb, lowered: loweredB) }
                }
                XCTAssertEqual(got, expected, "\(a) lowered \(loweredA) against \(b) lowered \(loweredB)")
            }
        }
        XCTAssertGreaterThan(equalSeen, 1_000)
    }

    /// Of several spellings of one key, the first in byte order; every one of them in byte
    /// order; nothing for a name of another key.
    func testFirstSpellingInByteOrder() {
        let t = table([bytes("data"), bytes("Data"), bytes("DATA"), bytes("other")])
        XCTAssertEqual(t.first(of: bytes("dAtA")), bytes("DATA"))
        XCTAssertEqual(t.all(of: bytes("data")), [bytes("DATA"), bytes("Data"), bytes("data")])
        XCTAssertEqual(t.first(of: bytes("OTHER")), bytes("other"))
        XCTAssertNil(t.first(of: bytes("dat")))
        XCTAssertNil(t.first(of: bytes("data2")))
        XCTAssertEqual(t.all(of: bytes("missing")), [])
    }

    /// A name of 255 bytes (NAME_MAX) is kept; a longer one, which no directory holds, is left
    /// out (the casefold fuzz target met one and took its absence for a fault).
    func testANameOverNameMaxIsLeftOut() {
        let longest = [UInt8](repeating: 0x59, count: 253) + [0xCC, 0x81]
        let t = table([longest, longest + [0x61]])
        XCTAssertEqual(t.first(of: longest), longest)
        XCTAssertNil(t.first(of: longest + [0x61]))
        XCTAssertEqual(t.count, 1)
    }

    /// Names whose key is not the name lowered: found by any spelling of the key, as
    /// `CaseFold.key` folds it (ß and ss, the Kelvin sign and k, a precomposed é and e with
    /// its accent).
    func testNamesThatAreNotASCII() {
        let t = table([bytes("Straße.txt"), bytes("\u{212A}elvin"), bytes("café"), bytes("cafe\u{301}s")])
        XCTAssertEqual(t.first(of: bytes("STRASSE.TXT")), bytes("Straße.txt"))
        XCTAssertEqual(t.first(of: bytes("strasse.txt")), bytes("Straße.txt"))
        XCTAssertEqual(t.first(of: bytes("kelvin")), bytes("\u{212A}elvin"))
        XCTAssertEqual(t.first(of: bytes("CAFE\u{301}")), bytes("café"))
        XCTAssertEqual(t.first(of: bytes("CAFÉS")), bytes("cafe\u{301}s"))
        XCTAssertNil(t.first(of: bytes("cafe")))
    }

    /// A name that is not valid UTF-8 is its own key, byte for byte: its capitals do not fold
    /// (as in the kernel), though lowering its ASCII letters would make it another name's.
    func testInvalidNamesMatchByteForByte() {
        let upper: [UInt8] = [0x41, 0xFF]
        let lower: [UInt8] = [0x61, 0xFF]
        let t = table([upper])
        XCTAssertEqual(t.first(of: upper), upper)
        XCTAssertNil(t.first(of: lower))
        let both = table([upper, lower])
        XCTAssertEqual(both.all(of: lower), [lower])
    }

    /// The name asked for is given back as it is when the directory spells it so.
    func testTheNameAskedForIsGivenBackWhenItIsTheSpelling() {
        let t = table([bytes("Rock.dds")])
        let name = bytes("Rock.dds")
        XCTAssertEqual(t.first(of: name), name)
    }

    /// A table made from a listing numbers its names as the listing does, and finds each
    /// name's first spelling (the whiteout files passed over where asked).
    func testATableOfAListingNumbersItsNames() {
        var list = EntryList()
        for name in ["b", "B", ".wh.x", ".WH.X", "a"] { list.append(bytes(name), type: 8, inode: 1) }
        let t = SpellingTable(list)
        XCTAssertEqual(t.count, 5)
        XCTAssertEqual(t.firstEntry(keyOf: 0), 1)
        XCTAssertEqual(t.firstEntry(keyOf: 1), 1)
        XCTAssertEqual(t.firstEntry(keyOf: 4), 4)
        XCTAssertEqual(t.firstEntry(keyOf: 3, skipping: { $0 == 2 }), 3)
        XCTAssertEqual(t.firstEntry(keyOf: 2), 3)
        var taken = SpellingTable()
        taken.add(entry: 0, of: t)
        XCTAssertTrue(taken.contains(keyOf: 1, in: t))
        XCTAssertFalse(taken.contains(keyOf: 4, in: t))
        XCTAssertEqual(t.compacted().first(of: bytes("A")), bytes("a"))
    }

    /// Past 65,535 names the index's slots widen: every name is still found, by any spelling.
    func testATableOfMoreNamesThanNarrowSlotsHold() {
        var t = SpellingTable()
        for index in 0 ..< 70_000 { t.add(bytes("Name\(index)")) }
        for index in stride(from: 0, to: 70_000, by: 997) + [65_534, 65_535, 69_999] {
            XCTAssertEqual(t.first(of: bytes("NAME\(index)")), bytes("Name\(index)"))
        }
        XCTAssertNil(t.first(of: bytes("name70000")))
        XCTAssertEqual(t.compacted().first(of: bytes("name65536")), bytes("Name65536"))
    }

    /// Random names over letters of both cases, letters whose folding is not ASCII, marks and
    /// bytes that are not UTF-8, in tables large enough to grow several times: every lookup
    /// agrees with `CaseFold.key` over the same names.
    func testAgreesWithTheKeysOfCaseFold() {
        var generator = SeededNumbers(seed: 0xCA5E)
        let pieces: [[UInt8]] = ["a", "A", "b", "B", "s", "S", "ß", "ẞ", "k", "\u{212A}", "e", "é", "E\u{301}", "\u{301}",
                                 ".", "1", "Σ", "σ", "ς", "İ", "i\u{307}"].map { Array($0.utf8) } + [[0xFF], [0x80], [0xC3]]
        var names: [[UInt8]] = []
        for _ in 0 ..< 3000 {
            var name: [UInt8] = []
            for _ in 0 ..< Int.random(in: 1 ... 4, using: &generator) { name += pieces.randomElement(using: &generator)! }
            names.append(name)
        }
        let unique = Array(Set(names))
        let t = table(unique)
        var byKey: [[UInt8]: [[UInt8]]] = [:]
        for name in unique { byKey[CaseFold.key(name), default: []].append(name) }
        for query in names.prefix(1000) + [bytes("zz"), [0x5A, 0xFF]] {
            let expected = (byKey[CaseFold.key(query)] ?? []).sorted { $0.lexicographicallyPrecedes($1) }
            XCTAssertEqual(t.all(of: query), expected, "\(query)")
            XCTAssertEqual(t.first(of: query), expected.first, "\(query)")
        }
    }
}
