import Foundation
import ProxyBundleResources
import XCTest

final class PropertyListTests: XCTestCase {
    func testXMLStringOfTheTopDictionary() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
              <key>Nested</key>
              <dict><key>CFBundleDevelopmentRegion</key><string>de</string></dict>
              <key>CFBundleIcons</key>
              <array><string>CFBundleDevelopmentRegion</string><string>x</string></array>
              <key>UIRequiresFullScreen</key><true/>
              <key>CFBundleDevelopmentRegion</key>
              <string>pt&amp;BR</string>
            </dict>
            </plist>
            """
        XCTAssertEqual(PropertyList.string("CFBundleDevelopmentRegion", in: Array(xml.utf8)), "pt&BR")
        XCTAssertNil(PropertyList.string("Missing", in: Array(xml.utf8)))
    }

    /// Written by Python's plistlib (FMT_BINARY): {CFBundleIdentifier, CFBundleDevelopmentRegion:
    /// fr, CFBundleVersion, Nested: {CFBundleDevelopmentRegion: de}}.
    static let binary: [UInt8] = [
        0x62, 0x70, 0x6c, 0x69, 0x73, 0x74, 0x30, 0x30, 0xd4, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x5f, 0x10,
        0x19, 0x43, 0x46, 0x42, 0x75, 0x6e, 0x64, 0x6c, 0x65, 0x44, 0x65, 0x76, 0x65, 0x6c, 0x6f, 0x70, 0x6d, 0x65, 0x6e,
        0x74, 0x52, 0x65, 0x67, 0x69, 0x6f, 0x6e, 0x5f, 0x10, 0x12, 0x43, 0x46, 0x42, 0x75, 0x6e, 0x64, 0x6c, 0x65, 0x49,
        0x64, 0x65, 0x6e, 0x74, 0x69, 0x66, 0x69, 0x65, 0x72, 0x5f, 0x10, 0x0f, 0x43, 0x46, 0x42, 0x75, 0x6e, 0x64, 0x6c,
        0x65, 0x56, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x56, 0x4e, 0x65, 0x73, 0x74, 0x65, 0x64, 0x52, 0x66, 0x72, 0x5f,
        0x10, 0x10, 0x63, 0x6f, 0x6d, 0x2e, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x64, 0x65, 0x6d, 0x6f, 0x51,
        0x31, 0xd1, 0x01, 0x09, 0x52, 0x64, 0x65, 0x08, 0x11, 0x2d, 0x42, 0x54, 0x5b, 0x5e, 0x71, 0x73, 0x76, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x79,
    ]

    /// {CFBundleDevelopmentRegion: "Español"}: a UTF-16 string.
    static let binaryUTF16: [UInt8] = [
        0x62, 0x70, 0x6c, 0x69, 0x73, 0x74, 0x30, 0x30, 0xd1, 0x01, 0x02, 0x5f, 0x10, 0x19, 0x43, 0x46, 0x42, 0x75, 0x6e,
        0x64, 0x6c, 0x65, 0x44, 0x65, 0x76, 0x65, 0x6c, 0x6f, 0x70, 0x6d, 0x65, 0x6e, 0x74, 0x52, 0x65, 0x67, 0x69, 0x6f,
        0x6e, 0x67, 0x00, 0x45, 0x00, 0x73, 0x00, 0x70, 0x00, 0x61, 0x00, 0xf1, 0x00, 0x6f, 0x00, 0x6c, 0x08, 0x0b, 0x27,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x36,
    ]

    func testBinaryStrings() {
        XCTAssertEqual(PropertyList.string("CFBundleDevelopmentRegion", in: Self.binary), "fr")
        XCTAssertEqual(PropertyList.string("CFBundleIdentifier", in: Self.binary), "com.example.demo")
        XCTAssertNil(PropertyList.string("Nested", in: Self.binary), "a dictionary is not a string")
        XCTAssertEqual(PropertyList.string("CFBundleDevelopmentRegion", in: Self.binaryUTF16), "Español")
    }

    func testDamagedListsHaveNoStrings() {
        var cut = Self.binary
        cut.removeLast(40)
        XCTAssertNil(PropertyList.string("CFBundleDevelopmentRegion", in: cut))
        var wrongTable = Self.binary
        wrongTable[wrongTable.count - 1] = 0xFF
        XCTAssertNil(PropertyList.string("CFBundleDevelopmentRegion", in: wrongTable))
        XCTAssertNil(PropertyList.string("CFBundleDevelopmentRegion", in: Array("bplist00".utf8)))
        XCTAssertNil(PropertyList.string("CFBundleDevelopmentRegion", in: Array("<dict><key>CFBundleDevelopmentRegion</key><string>x".utf8)))
    }

    typealias Value = PropertyList.Value

    /// `python`, a Python expression of a dictionary, written by Python's plistlib as `format`
    /// (BINARY or XML) into a temporary file, and read back.
    func plistlib(_ python: String, format: String = "BINARY") throws -> [UInt8] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("plist-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import plistlib, sys, datetime\n"
            + "open(sys.argv[1], 'wb').write(plistlib.dumps(\(python), fmt=plistlib.FMT_\(format), sort_keys=False))", file.path]
        try process.run()  // python3 is installed by Scripts/bootstrap.sh: its absence is a failure
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, python)
        return Array(try Data(contentsOf: file))
    }

    /// Objects (references of 1 byte) laid out as a `bplist00`, with offsets of 2 bytes.
    static func binaryList(_ objects: [[UInt8]], top: Int = 0) -> [UInt8] {
        var bytes = Array("bplist00".utf8)
        var offsets: [UInt8] = []
        for object in objects {
            offsets += [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)]
            bytes += object
        }
        let table = bytes.count
        func eight(_ value: Int) -> [UInt8] { (0 ..< 8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        return bytes + offsets + [0, 0, 0, 0, 0, 0, 2, 1] + eight(objects.count) + eight(top) + eight(table)
    }

    /// Every kind of value, as `info` reads it.
    static let everyKind = """
        {'CFBundleDevelopmentRegion': 'pt-BR', 'Escaped': '<a & "b">\\'', 'Unicode': 'Espa\\u00f1ol \\U0001F600',
         'CFBundleLocalizations': ['en', 3, '', 'fr', ['de'], 'ja'], 'True': True, 'False': False, 'Integer': -42,
         'Big': 2**40, 'Huge': 2**64 - 1, 'Real': 2.5, 'Data': b'\\x00\\x01', 'Date': datetime.datetime(2001, 1, 1),
         'Empty': '', 'EmptyArray': [], 'EmptyDict': {},
         'NSExtension': {'NSExtensionPointIdentifier': 'com.apple.widget', 'Deeper': {'List': [1, {'On': True}]}}}
        """
    static let everyKindRead: [String: Value] = [
        "CFBundleDevelopmentRegion": .string("pt-BR"), "Escaped": .string("<a & \"b\">'"), "Unicode": .string("Español 😀"),
        "CFBundleLocalizations": .array([.string("en"), .integer(3), .string(""), .string("fr"), .array([.string("de")]), .string("ja")]),
        "True": .boolean(true), "False": .boolean(false), "Integer": .integer(-42), "Big": .integer(1 << 40),
        "Huge": .other, "Real": .real(2.5), "Data": .data, "Date": .date,
        "Empty": .string(""), "EmptyArray": .array([]), "EmptyDict": .dictionary([:]),
        "NSExtension": .dictionary(["NSExtensionPointIdentifier": .string("com.apple.widget"),
                                    "Deeper": .dictionary(["List": .array([.integer(1), .dictionary(["On": .boolean(true)])])])]),
    ]

    func testEveryKindOfValueInBothFormats() throws {
        for format in ["BINARY", "XML"] {
            let bytes = try plistlib(Self.everyKind, format: format)
            let info = PropertyList.dictionary(in: bytes)
            XCTAssertEqual(info, Self.everyKindRead, format)
            XCTAssertEqual(info?["CFBundleLocalizations"]?.strings, ["en", "fr", "ja"], "only non-empty strings count")
            XCTAssertNotNil(info?["NSExtension"])
            XCTAssertEqual(PropertyList.string("Escaped", in: bytes), "<a & \"b\">'")
            XCTAssertNil(PropertyList.string("NSExtension", in: bytes), "a dictionary is not a string")
        }
        XCTAssertEqual(PropertyList.dictionary(in: Self.binary)?["Nested"], .dictionary(["CFBundleDevelopmentRegion": .string("de")]))
    }

    func testXMLForms() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <!-- a comment before -->
            <plist version="1.0">
            <dict>
              <key>A</key> <!-- between a key and its value --> <string>&lt;&#65;&#x42;&gt; &amp;&quot;&apos;<![CDATA[<&c>]]></string>
              <key>Empty</key><string/>
              <key>Array</key><array/>
              <key>Dict</key><dict/>
              <key>Hex</key><integer>0x1F</integer>
              <key>Plus</key><integer>+7</integer>
              <key>Real</key><real>-1e3</real>
              <key>Yes</key><true></true>
              <key>Data</key><data>
                AAEC
              </data>
              <key>Date</key><date>2001-01-01T00:00:00Z</date>
              <key>Nested</key><dict><key>In</key><array><dict><key>Deep</key><false/></dict></array></dict>
            </dict>
            </plist>
            """
        XCTAssertEqual(PropertyList.dictionary(in: Array(xml.utf8)), [
            "A": .string("<AB> &\"'<&c>"), "Empty": .string(""), "Array": .array([]), "Dict": .dictionary([:]),
            "Hex": .integer(31), "Plus": .integer(7), "Real": .integer(-1000) /* exactly an integer */, "Yes": .boolean(true), "Data": .data, "Date": .date,
            "Nested": .dictionary(["In": .array([.dictionary(["Deep": .boolean(false)])])]),
        ])
        XCTAssertEqual(PropertyList.dictionary(in: Array("<dict><key>A</key><integer>1</integer></dict>".utf8)), ["A": .integer(1)],
                       "the root needs no <plist>")
        XCTAssertNil(PropertyList.dictionary(in: Array("<plist><array><string>a</string></array></plist>".utf8)), "not a dictionary")
    }

    func testMalformedXMLIsNotRead() {
        let good = "<plist><dict><key>A</key><string>x</string></dict></plist>"
        XCTAssertEqual(PropertyList.string("A", in: Array(good.utf8)), "x")
        for bad in [
            "<plist><dict><key>A</key><string>x</string></dict>",  // unclosed
            "<plist><dict><key>A</key><strong>x</strong></dict></plist>",  // an unknown element
            "<plist><dict><key>A</key><string>x</string><key>B</key></dict></plist>",  // a key without a value
            "<plist><dict><string>x</string></dict></plist>",  // a value without a key
            "<plist><dict>text<key>A</key><string>x</string></dict></plist>",  // stray text
            "<plist><dict><key>A</key><string>&bogus;</string></dict></plist>",  // an unknown entity
            "<plist><dict><key>A</key><string>&#xD800;</string></dict></plist>",  // no such character
            "<plist><dict><key>A</key><string>x</dict></string></plist>",  // crossed
            "<plist><dict><key>A</key><integer>12a</integer></dict></plist>",
            "<plist><dict><key>A</key><integer>99999999999999999999</integer></dict></plist>",
            "<plist><dict><key>A</key><real>x</real></dict></plist>",
            "<plist><dict><key>A</key><true>x</true></dict></plist>",
            "<plist><dict><key>A</key><string><!-- x --></string></dict></plist>",
            "<plist><dict><key>A</key><string>x</string></dict><!-- unclosed",
            // refused by Apple's parser (FoundationEssentials), which reads XML lists
            "<!DOCTYPE plist [ <!ENTITY x \"y\"> ]><plist><dict><key>A</key><string>x</string></dict></plist>",
            "<plist><dict><key>A</key><integer> 1 </integer></dict></plist>",
            String(repeating: "<array>", count: 100) + String(repeating: "</array>", count: 100),
            "<plist><dict><key>A</key><array>" + String(repeating: "<array>", count: 70) + String(repeating: "</array>", count: 71)
                + "</dict></plist>",
        ] {
            XCTAssertNil(PropertyList.dictionary(in: Array(bad.utf8)), bad)
        }
        let deepEnough = "<dict><key>A</key>" + String(repeating: "<array>", count: 60) + String(repeating: "</array>", count: 60) + "</dict>"
        XCTAssertNotNil(PropertyList.dictionary(in: Array(deepEnough.utf8)))
        let bytes = Array(good.utf8)
        for end in 0 ..< bytes.count {
            XCTAssertNil(PropertyList.dictionary(in: Array(bytes[..<end])), "cut at \(end)")
        }
    }

    /// `_CFBundleGetInfoDictionaryBoolean`'s rule, in both formats.
    func testBooleans() throws {
        let cases: [(String, Bool)] = [
            ("True", true), ("False", false), ("'YES'", true), ("'yes'", true), ("'True'", true), ("'TRUE'", true),
            ("'no'", false), ("'1'", false), ("''", false), ("1", true), ("-1", true), ("0", false), ("2**31 - 1", true),
            ("2**32", false), ("2.0", true), ("0.5", false), ("0.0", false), ("[True]", false), ("{'a': True}", false),
        ]
        let python = "{" + cases.enumerated().map { "'K\($0.offset)': \($0.element.0)" }.joined(separator: ", ") + "}"
        for format in ["BINARY", "XML"] {
            let info = try XCTUnwrap(PropertyList.dictionary(in: plistlib(python, format: format)))
            for (index, (literal, expected)) in cases.enumerated() {
                XCTAssertEqual(info["K\(index)"]?.boolValue, expected, "\(format) \(literal)")
            }
            XCTAssertEqual(info["CFBundleAllowMixedLocalizations"]?.boolValue ?? false, false, "absent")
        }
        XCTAssertEqual(Value.real(.nan).boolValue, false)
        XCTAssertEqual(Value.string("yes ").boolValue, false)
    }

    func testHostileBinaries() throws {
        let good = try plistlib(Self.everyKind)
        XCTAssertNotNil(PropertyList.dictionary(in: good))
        for end in 0 ..< good.count {
            XCTAssertNil(PropertyList.dictionary(in: Array(good[..<end])), "cut at \(end)")
        }
        // any byte changed: read or not, without a crash
        for index in good.indices {
            for byte: UInt8 in [0x00, 0x0F, 0x5F, 0x7F, 0x80, 0xAF, 0xDF, 0xFF] {
                var changed = good
                changed[index] = byte
                _ = PropertyList.dictionary(in: changed)
            }
        }
        let a: [UInt8] = [0x51, 0x61]  // "a"
        XCTAssertEqual(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0xA2, 1, 1]])),
                       ["a": .array([.string("a"), .string("a")])], "one object in two places")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 0], a])), "a dictionary that contains itself")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0xA1, 3], [0xA1, 2]])), "a cycle of arrays")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0xA1, 9]])), "no such object")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0xA1]])), "references past the objects")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0x5F, 0x13, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]])),
                     "a string longer than the list")
        XCTAssertEqual(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0x52, 0x61, 0xE9]])), ["a": .string("aé")],
                       "ASCII that is not: Latin-1, as CoreFoundation reads it")
        XCTAssertEqual(PropertyList.dictionary(in: Self.binaryList([[0xD2, 1, 1, 2, 3], a, [0x10, 1], [0x10, 2]])), ["a": .integer(1)],
                       "a key twice: the first wins, as in CoreFoundation")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 2, 1], a, [0xA0]])), "an array for a key")
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList([[0xD1, 1, 2], a, [0x07]])), "an unknown marker")
        XCTAssertEqual(PropertyList.dictionary(in: Self.binaryList([[0xD2, 1, 2, 3, 1], a, [0x10, 1], [0x23, 0x40, 0, 0, 0, 0, 0, 0, 0]])),
                       ["a": .real(2)], "a number for a key is no key a name finds")
        var outside = Self.binaryList([[0xD1, 1, 2], a, a])
        outside[outside.count - 32 - 2] = 0xFF  // the last object's offset: past the table
        XCTAssertNil(PropertyList.dictionary(in: outside), "an offset outside the objects")
        var badTop = Self.binaryList([[0xD1, 1, 2], a, a])
        badTop[badTop.count - 9] = 3
        XCTAssertNil(PropertyList.dictionary(in: badTop), "a top object that is not there")

        // nested 40 deep, each array twice over the next: shared, so read once each
        var shared = [[0xD1, 1, 2], a] + (2 ..< 42).map { [0xA2, UInt8($0 + 1), UInt8($0 + 1)] }
        shared.append([0x09])
        XCTAssertNotNil(PropertyList.dictionary(in: Self.binaryList(shared)))
        let tooDeep = [[0xD1, 1, 2], a] + (2 ..< 80).map { [0xA1, UInt8($0 + 1)] } + [[0x09]]
        XCTAssertNil(PropertyList.dictionary(in: Self.binaryList(tooDeep)))
    }

    /// A binary list FoundationEssentials' `PropertyListDecoder` stops the process on (an
    /// illegal instruction in `BPlistScanner.scanArrayOrSet`; found when binary lists were
    /// handed to it): everyKind with one byte changed. Binary lists are read by our reader,
    /// which refuses this one.
    func testABinaryListTheDecoderTrapsOnIsRefused() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/plist-binary/corpus/finding-decoder-trap").standardized
        let bytes = Array(try Data(contentsOf: file))
        XCTAssertEqual(bytes.count, 522)
        XCTAssertThrowsError(try PropertyList.read(bytes)) { error in
            XCTAssertEqual("\(error)", "is not a well-formed binary property list")
        }
    }

    /// An XML list FoundationEssentials' decoder stops the process on (a fatal error in
    /// `BufferView._decodeScalars`, skipping the spaces of an <integer> that holds bytes that
    /// are not UTF-8; found by the plist-xml fuzz target): refused before the decoder sees it.
    func testAnXMLListThatIsNotUTF8IsRefused() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/plist-xml/corpus/finding-decoder-trap-utf8").standardized
        let bytes = Array(try Data(contentsOf: file))
        XCTAssertTrue(bytes.starts(with: Array("<?xml".utf8)))
        XCTAssertThrowsError(try PropertyList.read(bytes)) { error in XCTAssertEqual("\(error)", "is not UTF-8") }
        XCTAssertNil(PropertyList.dictionary(in: Array("<plist><dict><key>A</key><integer>\u{1}</integer></dict></plist>".utf8) + [0xFF]))
    }
}
