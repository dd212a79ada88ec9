import Foundation
@testable import ProxyBundleCore
import XCTest

/// Names fold as ext4's and tmpfs's casefold fold them, checked against Unicode's own test data
/// (Debian's unicode-data, installed by Scripts/bootstrap.sh): canonical equivalents fold equal,
/// every full case folding holds, and the classic traps (final sigma, sharp s, Turkish i)
/// fold as full folding without a locale says.
final class CaseFoldTests: XCTestCase {
    static let unicode = "/usr/share/unicode"

    private func key(_ text: String) -> [UInt8] {
        CaseFold.key(Array(text.utf8))
    }

    private func text(_ hexes: Substring) -> String {
        var scalars = String.UnicodeScalarView()
        for word in hexes.split(separator: " ") {
            guard let value = UInt32(word, radix: 16), let scalar = Unicode.Scalar(value) else { continue }
            scalars.append(scalar)
        }
        return String(scalars)
    }

    /// The data lines of a Unicode file, split at `;`, comments removed.
    private func records(_ contents: String) -> [[Substring]] {
        contents.split(separator: "\n").compactMap { line in
            let data = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            guard !data.hasPrefix("@"), data.contains(";") else { return nil }
            return data.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces)[...] }
        }
    }

    private func unicodeFile(_ name: String) throws -> String {
        let path = CaseFoldTests.unicode + "/" + name
        if FileManager.default.fileExists(atPath: path) { return try String(contentsOfFile: path, encoding: .utf8) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/bzcat")
        process.arguments = [path + ".bz2"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0, !data.isEmpty else {
            throw FixtureError("cannot read \(path)(.bz2); Scripts/bootstrap.sh installs unicode-data", errno: ENOENT)
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The code points DerivedAge.txt dates Unicode 12.1 or earlier: the tables are 12.1's, as
    /// ext4's and tmpfs's (see CaseFoldOracleTests); the data files are newer.
    private func ofUnicode121() throws -> Set<UInt32> {
        var codes: Set<UInt32> = []
        for fields in records(try unicodeFile("DerivedAge.txt")) where fields.count >= 2 {
            let age = fields[1].split(separator: ".").compactMap { Int($0) }
            guard age.count == 2, (age[0], age[1]) <= (12, 1) else { continue }
            let bounds = fields[0].split(separator: ".", omittingEmptySubsequences: true).compactMap { UInt32($0, radix: 16) }
            guard let first = bounds.first, let last = bounds.last else { continue }
            for code in first ... last { codes.insert(code) }
        }
        return codes
    }

    private func isOf121(_ hexes: Substring, _ codes: Set<UInt32>) -> Bool {
        hexes.split(separator: " ").allSatisfy { UInt32($0, radix: 16).map(codes.contains) ?? false }
    }

    /// NormalizationTest.txt (its lines of Unicode 12.1 characters): c1, c2 and c3 are
    /// canonically equivalent, so are c4 and c5; each group folds to one key, and a key folds
    /// to itself.
    func testCanonicalEquivalentsOfNormalizationTestFoldEqual() throws {
        var lines = 0
        let codes = try ofUnicode121()
        // U+0345 folds to ι before marks are ordered, as on ext4: its equivalents in another
        // order are other names there (CaseFoldOracleTests), so its lines are left out
        for fields in records(try unicodeFile("NormalizationTest.txt"))
        where fields.count >= 5 && isOf121(fields[0], codes) && !fields[0].contains("0345") {
            let c = fields.prefix(5).map(text)
            let k3 = key(c[2])
            XCTAssertEqual(key(c[0]), k3, "c1 of \(fields[0])")
            XCTAssertEqual(key(c[1]), k3, "c2 of \(fields[0])")
            XCTAssertEqual(key(c[3]), key(c[4]), "c4 of \(fields[0])")
            XCTAssertEqual(CaseFold.key(k3), k3, "key of \(fields[0]) folds again")
            lines += 1
        }
        XCTAssertGreaterThan(lines, 18_000)
    }

    /// CaseFolding.txt, statuses C and F: a code point of Unicode 12.1 folds as its full
    /// folding does, to that folding decomposed (Foundation's NFD as the second opinion); S
    /// and T are not used; a code point added later folds to nothing but itself.
    func testEveryFullCaseFoldingHolds() throws {
        var checked = 0
        let codes = try ofUnicode121()
        for fields in records(try unicodeFile("CaseFolding.txt")) where fields.count >= 3 && ["C", "F"].contains(fields[1]) {
            guard isOf121(fields[0], codes) else {
                XCTAssertEqual(key(text(fields[0])), Array(text(fields[0]).utf8), "\(fields[0]) is newer than Unicode 12.1")
                continue
            }
            let original = text(fields[0]), folding = text(fields[2])
            XCTAssertEqual(key(original), key(folding), "\(fields[0])")
            XCTAssertEqual(key(original), Array(folding.decomposedStringWithCanonicalMapping.utf8), "\(fields[0])")
            checked += 1
        }
        XCTAssertGreaterThan(checked, 1_400)
    }

    /// A key folds to itself, for every code point: folding is done in one pass.
    func testEveryCodePointsKeyIsItsOwnKey() {
        var failures = 0
        for value in UInt32(0x80) ... 0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let once = key(String(Character(scalar)))
            if CaseFold.key(once) != once {
                failures += 1
                if failures <= 5 { XCTFail("U+\(String(value, radix: 16, uppercase: true)) folds again") }
            }
        }
        XCTAssertEqual(failures, 0)
    }

    func testGermanSharpSIsDoubleS() {
        XCTAssertEqual(key("Straße.txt"), key("STRASSE.TXT"))
        XCTAssertEqual(key("ẞ"), key("ss"))  // capital sharp s: full folding, not the simple ß
        XCTAssertNotEqual(key("ß"), key("s"))
        XCTAssertTrue(CaseFold.equal(Array("MASSE".utf8), Array("Maße".utf8)))
    }

    func testFinalSigmaFoldsWithEverySigma() {
        XCTAssertEqual(key("ΟΔΟΣ"), key("οδος"))
        XCTAssertEqual(key("οδος"), key("οδοσ"))
        XCTAssertEqual(key("ς"), Array("σ".utf8))
    }

    /// No locale: the Turkish rules (status T) are not applied.
    func testTurkishIsFoldWithoutLocale() {
        XCTAssertEqual(key("I"), Array("i".utf8))
        XCTAssertEqual(key("İ"), Array("i\u{307}".utf8))  // dotted capital: i and a combining dot
        XCTAssertEqual(key("İ"), key("i\u{307}"))
        XCTAssertNotEqual(key("İ"), key("i"))
        XCTAssertEqual(key("ı"), Array("ı".utf8))  // dotless small i stays itself
        XCTAssertNotEqual(key("ı"), key("i"))
        XCTAssertNotEqual(key("ı"), key("I"))
    }

    /// Names that differ in bytes and in normalization form, equal only once normalized.
    func testNamesEqualOnlyAfterNormalization() {
        XCTAssertEqual(key("Café"), key("CAFE\u{301}"))  // precomposed é against e and acute
        XCTAssertEqual(key("\u{212B}"), key("å"))  // ANGSTROM SIGN
        XCTAssertEqual(key("\u{2126}"), key("ω"))  // OHM SIGN
        XCTAssertEqual(key("a\u{323}\u{301}"), key("A\u{301}\u{323}"))  // marks in either order
        XCTAssertEqual(key("한글"), key("\u{1112}\u{1161}\u{11AB}\u{1100}\u{1173}\u{11AF}"))  // Hangul
        // ypogegrammeni folds to iota, a letter, before the marks are ordered, as on ext4
        XCTAssertEqual(key("\u{3B1}\u{345}\u{301}"), key("\u{3B1}\u{3B9}\u{301}"))
        XCTAssertNotEqual(key("\u{3B1}\u{345}\u{301}"), key("\u{3B1}\u{301}\u{3B9}"))
        // an ignorable folds to nothing, but marks are not ordered across it, as on ext4
        XCTAssertEqual(key("a\u{200B}b"), key("AB"))
        XCTAssertNotEqual(key("a\u{301}\u{200B}\u{328}"), key("a\u{328}\u{301}"))
        XCTAssertNotEqual(key("Cafe"), key("Café"))
        XCTAssertNotEqual(key("x²"), key("x2"))  // compatibility equivalents stay apart
        XCTAssertEqual(key("ﬁle"), key("FILE"))  // ... but the fi ligature has a full folding
    }

    /// A name that is not valid UTF-8 is matched byte for byte, even its ASCII letters.
    func testInvalidUTF8IsComparedByteForByte() {
        let invalid: [UInt8] = [0x41, 0xFF]
        XCTAssertEqual(CaseFold.key(invalid), invalid)
        XCTAssertFalse(CaseFold.equal(invalid, [0x61, 0xFF]))
        XCTAssertTrue(CaseFold.equal(invalid, invalid))
        XCTAssertNotEqual(CaseFold.key([0xC1, 0x81]), key("a"))  // an overlong A
        XCTAssertNotEqual(CaseFold.key([0xC1, 0x81]), key("A"))
        XCTAssertEqual(CaseFold.key([0xED, 0xA0, 0x80]), [0xED, 0xA0, 0x80])  // a surrogate
        XCTAssertEqual(CaseFold.key([0x45, 0xCC]), [0x45, 0xCC])  // cut short
    }

    /// The decoder takes exactly what Swift's own validation takes, over 200,000 short byte
    /// strings (a fixed sequence, mostly bytes of multi-byte forms).
    func testDecoderAgreesWithSwiftsValidation() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let pool: [UInt8] = [0x41, 0x7A, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF,
                             0xF0, 0xF4, 0xF5, 0xFF]
        for _ in 0 ..< 200_000 {
            var bytes: [UInt8] = []
            for _ in 0 ..< 1 + Int(state >> 61) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes.append(pool[Int(state >> 33) % pool.count])
            }
            let ours = CaseFold.decode(bytes)
            let swift = reference(bytes)
            XCTAssertEqual(ours, swift, "\(bytes)")
            if ours != swift { break }
        }
    }

    /// Each character checked by Swift's own validation, but a continuation byte alone after
    /// the first byte, which the kernel's casefold keeps as it is (CaseFoldOracleTests).
    private func reference(_ bytes: [UInt8]) -> [UInt32]? {
        var scalars: [UInt32] = []
        var index = 0
        while index < bytes.count {
            let lead = bytes[index]
            if lead < 0x80 || (lead < 0xC0 && index > 0) {
                scalars.append(lead < 0x80 ? UInt32(lead) : CaseFold.strayByte | UInt32(lead))
                index += 1
                continue
            }
            let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
            guard lead >= 0xC0, index + length <= bytes.count,
                  let text = String(validating: bytes[index ..< index + length], as: UTF8.self),
                  let scalar = text.unicodeScalars.first, text.unicodeScalars.count == 1 else { return nil }
            scalars.append(scalar.value)
            index += length
        }
        return scalars
    }

    func testASCIICompareLowersLettersOnly() {
        XCTAssertTrue(CaseFold.equal(Array("README.md".utf8), Array("readme.MD".utf8)))
        XCTAssertFalse(CaseFold.equal(Array("@".utf8), Array("`".utf8)))
        XCTAssertFalse(CaseFold.equal(Array("[x]".utf8), Array("{x}".utf8)))
        XCTAssertFalse(CaseFold.equal(Array("ab".utf8), Array("abc".utf8)))
        XCTAssertEqual(key("Data/Textures"), Array("data/textures".utf8))
    }

    /// A name already folded needs no second copy in a cache.
    func testKeyIfDifferentIsNilForFoldedNames() {
        XCTAssertNil(CaseFold.keyIfDifferent(Array("textures".utf8)))
        XCTAssertNil(CaseFold.keyIfDifferent(Array("e\u{301}".utf8)))
        XCTAssertEqual(CaseFold.keyIfDifferent(Array("Rock.DDS".utf8)), Array("rock.dds".utf8))
        XCTAssertEqual(CaseFold.keyIfDifferent(Array("é".utf8)), Array("e\u{301}".utf8))
    }

    func testFoldedNamesFindEachOtherInADictionary() {
        var byName: [FoldedName: String] = [:]
        byName[FoldedName(Array("Textures".utf8))] = "first"
        XCTAssertEqual(byName[FoldedName(Array("TEXTURES".utf8))], "first")
        XCTAssertNil(byName[FoldedName(Array("texture".utf8))])
    }
}
