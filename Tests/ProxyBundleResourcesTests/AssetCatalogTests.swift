import CatalogWriter
import Foundation
import ProxyBundleResources
import XCTest

typealias Rendition = AssetCatalog.Rendition

final class AssetCatalogTests: XCTestCase {
    // MARK: round trips

    func testNamesScalesAndIdioms() throws {
        let catalog = try AssetCatalog(bytes: CatalogWriter()
            .add(name: "icon", scale: 1, idiom: 1).add(name: "icon", scale: 2, idiom: 1).add(name: "icon", scale: 3, idiom: 1)
            .add(name: "icon", scale: 2, idiom: 2)
            .add(name: "logo", scale: 0, idiom: 0)
            .facet("tint").facet("Zebra").facet("été")
            .bytes())
        XCTAssertEqual(catalog.names, ["Zebra", "icon", "logo", "tint", "été"], "byte order")
        XCTAssertEqual(catalog.renditions(named: "icon"),
                       [Rendition(scale: 1, idiom: 1), Rendition(scale: 2, idiom: 1), Rendition(scale: 3, idiom: 1),
                        Rendition(scale: 2, idiom: 2)])
        XCTAssertEqual(catalog.rendition(named: "icon", scale: 2, idiom: .pad), Rendition(scale: 2, idiom: 2))
        XCTAssertEqual(catalog.rendition(named: "icon", scale: 3, idiom: .phone), Rendition(scale: 3, idiom: 1))
        XCTAssertNil(catalog.rendition(named: "icon", scale: 1, idiom: .pad), "no pad or universal 1x")
        XCTAssertNil(catalog.rendition(named: "icon", scale: 3, idiom: .pad))
        for scale in 1...3 {
            XCTAssertEqual(catalog.rendition(named: "logo", scale: scale, idiom: .pad), Rendition(scale: 0, idiom: 0),
                           "a universal vector rendition serves every device")
        }
        XCTAssertEqual(catalog.renditions(named: "tint"), [])
        XCTAssertNil(catalog.rendition(named: "tint", scale: 2, idiom: .phone))
        XCTAssertEqual(catalog.renditions(named: "missing"), [])
        XCTAssertNil(catalog.rendition(named: "Icon", scale: 2, idiom: .pad), "names are case-sensitive")
        XCTAssertFalse(catalog.thinned)
        XCTAssertEqual(catalog.thinning, "")
        XCTAssertEqual(catalog.appearances, [:])
    }

    func testExactScaleThenIdiomThenUniversalThenVector() throws {
        let catalog = try AssetCatalog(bytes: CatalogWriter()
            .add(name: "a", scale: 0, idiom: 0).add(name: "a", scale: 0, idiom: 2)
            .add(name: "a", scale: 2, idiom: 0).add(name: "a", scale: 2, idiom: 2)
            .bytes())
        XCTAssertEqual(catalog.rendition(named: "a", scale: 2, idiom: .pad), Rendition(scale: 2, idiom: 2))
        XCTAssertEqual(catalog.rendition(named: "a", scale: 2, idiom: .phone), Rendition(scale: 2, idiom: 0))
        XCTAssertEqual(catalog.rendition(named: "a", scale: 3, idiom: .pad), Rendition(scale: 0, idiom: 2))
        XCTAssertEqual(catalog.rendition(named: "a", scale: 1, idiom: .phone), Rendition(scale: 0, idiom: 0))
        let scaleFirst = try AssetCatalog(bytes: CatalogWriter()
            .add(name: "c", scale: 0, idiom: 2).add(name: "c", scale: 2, idiom: 0).bytes())
        XCTAssertEqual(scaleFirst.rendition(named: "c", scale: 2, idiom: .pad), Rendition(scale: 2, idiom: 0),
                       "the exact scale before the idiom")
        let padVectorOnly = try AssetCatalog(bytes: CatalogWriter().add(name: "b", scale: 0, idiom: 2).bytes())
        XCTAssertNil(padVectorOnly.rendition(named: "b", scale: 3, idiom: .phone), "a pad rendition does not serve a phone")
    }

    /// As in a catalog thinned for one phone (Xcode 6's carutil): no idiom in the keys.
    func testKeyFormatWithoutIdiomAndThinned() throws {
        let thinning = "carutil 802.000000, thinned <mode app> <idiom 1> <scale 3>"
        let catalog = try AssetCatalog(bytes: CatalogWriter(keyFormat: [12, 17, 1, 2], thinning: thinning)
            .add(name: "icon", scale: 3, idiom: 1).bytes())
        XCTAssertEqual(catalog.renditions(named: "icon"), [Rendition(scale: 3, idiom: 0)])
        XCTAssertEqual(catalog.rendition(named: "icon", scale: 3, idiom: .pad), Rendition(scale: 3, idiom: 0))
        XCTAssertTrue(catalog.thinned)
        XCTAssertEqual(catalog.thinning, thinning)
    }

    /// The thinning arguments fill their 256 bytes: the deployment platform's version after
    /// them is not part of them.
    func testThinningArgumentsOfAll256Bytes() throws {
        let thinning = String(repeating: "<idiom 1> ", count: 26)
        let catalog = try AssetCatalog(bytes: CatalogWriter(thinning: thinning).bytes())
        XCTAssertEqual(catalog.thinning, String(thinning.prefix(256)))
    }

    func testAnyAttributeOrder() throws {
        let renditions = [Rendition(scale: 2, idiom: 1, appearance: 1, subtype: 2436, localization: 3, deploymentTarget: 8),
                          Rendition(scale: 3, idiom: 2, appearance: 4, subtype: 0, localization: 0, deploymentTarget: 5)]
        let orders: [[UInt32]] = [CatalogWriter.xcode12KeyFormat, CatalogWriter.xcode12KeyFormat.reversed(),
                                  [17, 25, 13, 16, 7, 15, 12], [7, 13, 1, 2, 3, 4, 6, 17, 8, 9, 10, 14, 11, 12, 15, 16, 25]]
        for order in orders {
            var writer = CatalogWriter(keyFormat: order)
            for r in renditions {
                writer = writer.add(name: "x", scale: r.scale, idiom: r.idiom, appearance: r.appearance, subtype: r.subtype,
                                    localization: r.localization, deploymentTarget: r.deploymentTarget)
            }
            XCTAssertEqual(try AssetCatalog(bytes: writer.bytes()).renditions(named: "x"), renditions, "\(order)")
        }
    }

    func testSeveralRenditionsPerCombinationAndAppearances() throws {
        let writer = CatalogWriter(appearances: [("UIAppearanceAny", 0), ("UIAppearanceDark", 1), ("UIAppearanceLight", 4)])
            .add(name: "bg", scale: 2, idiom: 0, appearance: 1).add(name: "bg", scale: 2, idiom: 0, appearance: 0)
            .add(name: "bg", scale: 2, idiom: 0, deploymentTarget: 7)
        let catalog = try AssetCatalog(bytes: writer.bytes())
        XCTAssertEqual(catalog.renditions(named: "bg"),
                       [Rendition(scale: 2, idiom: 0, appearance: 1), Rendition(scale: 2, idiom: 0),
                        Rendition(scale: 2, idiom: 0, deploymentTarget: 7)])
        XCTAssertEqual(catalog.rendition(named: "bg", scale: 2, idiom: .phone), Rendition(scale: 2, idiom: 0, appearance: 1),
                       "the first of the combination")
        XCTAssertEqual(catalog.appearances, [0: "UIAppearanceAny", 1: "UIAppearanceDark", 4: "UIAppearanceLight"])
        XCTAssertEqual(catalog.renditions(named: "bg").map(\.description),
                       ["scale 2, universal, appearance 1", "scale 2, universal, appearance 0",
                        "scale 2, universal, appearance 0, deployment target 7"])
        XCTAssertEqual(Rendition(scale: 0, idiom: 9, subtype: 2436, localization: 2).description,
                       "vector, idiom 9, appearance 0, subtype 2436, localization 2")
    }

    /// Renditions of identifier 0 are packed atlases: a facet of identifier 0 has none of them.
    func testIdentifierZeroIsSkipped() throws {
        let catalog = try AssetCatalog(bytes: CatalogWriter()
            .facet("atlas", identifier: 0).add(identifier: 0, attributes: [12: 2, 15: 1])
            .add(name: "icon", scale: 2, idiom: 1).bytes())
        XCTAssertEqual(catalog.names, ["atlas", "icon"])
        XCTAssertEqual(catalog.renditions(named: "atlas"), [])
        XCTAssertNil(catalog.rendition(named: "atlas", scale: 2, idiom: .phone))
    }

    func testTreesOfSeveralLeaves() throws {
        var writer = CatalogWriter(leafCapacity: 2)
        let names = (0 ..< 7).map { "image\($0)" }
        for name in names {
            for scale in 1...3 { writer = writer.add(name: name, scale: scale, idiom: 2) }
        }
        let (bytes, layout) = writer.build()
        XCTAssertEqual(layout.leaves["RENDITIONS"]?.count, 11)
        XCTAssertEqual(layout.leaves["FACETKEYS"]?.count, 4)
        let catalog = try AssetCatalog(bytes: bytes)
        XCTAssertEqual(catalog.names, names)
        for name in names {
            XCTAssertEqual(catalog.renditions(named: name).map(\.scale), [1, 2, 3], name)
        }
    }

    // MARK: damaged and hostile files

    static let sample = CatalogWriter(appearances: [("UIAppearanceAny", 0), ("UIAppearanceDark", 1)], leafCapacity: 2)
        .add(name: "icon", scale: 2, idiom: 1).add(name: "icon", scale: 3, idiom: 1).add(name: "icon", scale: 2, idiom: 2)
        .add(name: "logo", scale: 0, idiom: 0, appearance: 1).facet("tint")
        .build()

    /// The reader's complaint about `bytes`; fails the test if it reads them.
    func complaint(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            let catalog = try AssetCatalog(bytes: bytes)
            XCTFail("read as \(catalog.names)", file: file, line: line)
            return ""
        } catch {
            return error.what
        }
    }

    func testTheSampleReads() throws {
        let catalog = try AssetCatalog(bytes: Self.sample.bytes)
        XCTAssertEqual(catalog.names, ["icon", "logo", "tint"])
        XCTAssertEqual(catalog.renditions(named: "icon").count, 3)
        XCTAssertEqual(catalog.appearances.count, 2)
    }

    func testEveryTruncationIsUnreadable() {
        let bytes = Self.sample.bytes
        for length in 0 ..< bytes.count {
            XCTAssertThrowsError(try AssetCatalog(bytes: Array(bytes[..<length])), "\(length) bytes")
        }
    }

    func testWrongMagics() {
        var bytes = Self.sample.bytes
        bytes[7] = UInt8(ascii: "f")
        XCTAssertTrue(complaint(bytes).contains("BOMStore"))
        for (variable, offset) in [("KEYFORMAT", 0), ("RENDITIONS", 0), ("FACETKEYS", 3), ("EXTENDED_METADATA", 1)] {
            bytes = Self.sample.bytes
            bytes[address(of: variable) + offset] ^= 0x20
            XCTAssertTrue(complaint(bytes).contains(variable), variable)
        }
    }

    func testMissingParts() {
        for variable in ["KEYFORMAT", "RENDITIONS", "FACETKEYS"] {
            var bytes = Self.sample.bytes
            let name = Array(variable.utf8)
            let at = bytes[Self.sample.layout.variablesAddress...].firstRange(of: name)!.lowerBound
            bytes[at] = UInt8(ascii: "_")
            XCTAssertEqual(complaint(bytes), "no \(variable)")
        }
    }

    func testKeyFormatWithoutIdentifier() {
        let bytes = CatalogWriter(keyFormat: [12, 15, 1, 2]).add(name: "icon", scale: 2, idiom: 1).bytes()
        XCTAssertTrue(complaint(bytes).contains("identifier"))
    }

    func testBlockIDsOutOfRange() {
        let count = Self.sample.layout.blocks.count
        var bytes = Self.sample.bytes
        put(UInt32(count), in: &bytes, at: address(of: "RENDITIONS") + 8)  // the root node
        XCTAssertTrue(complaint(bytes).contains("a node of RENDITIONS: block \(count) of \(count)"))
        bytes = Self.sample.bytes
        let leaf = Self.sample.layout.leaves["FACETKEYS"]![0]
        put(0xFFFF_FFFF, in: &bytes, at: Self.sample.layout.blocks[Int(leaf)].address + 16)  // a key
        XCTAssertTrue(complaint(bytes).contains("a key of FACETKEYS"))
        bytes = Self.sample.bytes
        let variable = Self.sample.bytes[Self.sample.layout.variablesAddress...].firstRange(of: Array("KEYFORMAT".utf8))!
        put(0, in: &bytes, at: variable.lowerBound - 5)  // the variable's block id: 0 is none
        XCTAssertTrue(complaint(bytes).contains("KEYFORMAT: block 0"))
    }

    func testBlocksPastTheEnd() {
        var bytes = Self.sample.bytes
        let entry = Self.sample.layout.tableAddress + 4 + 8 * Int(Self.sample.layout.variables["KEYFORMAT"]!)
        put(UInt32(bytes.count), in: &bytes, at: entry + 4)  // its length
        XCTAssertTrue(complaint(bytes).contains("past its end"))
        bytes = Self.sample.bytes
        put(0xFFFF_FFF0, in: &bytes, at: entry)  // its address
        XCTAssertTrue(complaint(bytes).contains("past its end"))
        bytes = Self.sample.bytes
        put(0xFFFF_FFFF, in: &bytes, at: Self.sample.layout.tableAddress)  // the number of blocks
        XCTAssertTrue(complaint(bytes).contains("the block table lists"))
    }

    func testLeafLeadingToItself() {
        for tree in ["RENDITIONS", "FACETKEYS", "APPEARANCEKEYS"] {
            var bytes = Self.sample.bytes
            let leaf = Self.sample.layout.leaves[tree]!.last!
            put(leaf, in: &bytes, at: Self.sample.layout.blocks[Int(leaf)].address + 4)
            XCTAssertTrue(complaint(bytes).contains("\(tree) loops"), tree)
        }
    }

    func testLeavesInACircle() {
        var bytes = Self.sample.bytes
        let leaves = Self.sample.layout.leaves["RENDITIONS"]!
        put(leaves[0], in: &bytes, at: Self.sample.layout.blocks[Int(leaves[1])].address + 4)
        XCTAssertTrue(complaint(bytes).contains("RENDITIONS loops"))
    }

    func testBranchLeadingToItself() {
        var bytes = Self.sample.bytes
        let root = Int(read32(Self.sample.bytes, at: address(of: "RENDITIONS") + 8))
        put(UInt32(root), in: &bytes, at: Self.sample.layout.blocks[root].address + 12)
        XCTAssertTrue(complaint(bytes).contains("RENDITIONS loops"))
    }

    func testLeafLeadingToABranch() {
        var bytes = Self.sample.bytes
        let leaf = Self.sample.layout.leaves["FACETKEYS"]!.last!
        let branch = read32(bytes, at: address(of: "RENDITIONS") + 8)
        put(branch, in: &bytes, at: Self.sample.layout.blocks[Int(leaf)].address + 4)
        XCTAssertTrue(complaint(bytes).contains("a leaf of FACETKEYS leads to a branch"))
    }

    /// libbom counts a branch's entries one less than its children: a branch of two leaves
    /// has count 1, of one leaf count 0, and its entry 0 is read all the same.
    func testBranchOfCountZero() throws {
        var bytes = Self.sample.bytes
        let root = Int(read32(bytes, at: address(of: "RENDITIONS") + 8))
        XCTAssertEqual(bytes[Self.sample.layout.blocks[root].address + 3], 1, "two leaves")
        bytes[Self.sample.layout.blocks[root].address + 3] = 0
        XCTAssertEqual(try AssetCatalog(bytes: bytes).renditions(named: "icon").count, 3)
    }

    func testMoreEntriesThanBlocks() {
        var bytes = Self.sample.bytes
        let leaf = Int(Self.sample.layout.leaves["FACETKEYS"]![0])
        let entry = Self.sample.layout.tableAddress + 4 + 8 * leaf
        put(UInt32(Self.sample.layout.tableAddress - Self.sample.layout.blocks[leaf].address), in: &bytes, at: entry + 4)
        bytes[Self.sample.layout.blocks[leaf].address + 2 ..< Self.sample.layout.blocks[leaf].address + 4] = [0xFF, 0xFF]
        XCTAssertTrue(complaint(bytes).contains("more entries than blocks"))
    }

    /// Keys that all are the whole file: a small file must not take memory out of proportion.
    func testOverlappingBlocks() {
        var bytes = Self.sample.bytes
        let leaf = Self.sample.layout.blocks[Int(Self.sample.layout.leaves["FACETKEYS"]![0])].address
        for index in 0 ..< 2 {
            let key = Int(read32(bytes, at: leaf + 16 + 8 * index))
            let entry = Self.sample.layout.tableAddress + 4 + 8 * key
            put(0, in: &bytes, at: entry)
            put(UInt32(bytes.count), in: &bytes, at: entry + 4)
        }
        XCTAssertTrue(complaint(bytes).contains("FACETKEYS's blocks overlap"))
    }

    func testTruncatedKeysAndValues() {
        var bytes = Self.sample.bytes
        let leaf = Self.sample.layout.blocks[Int(Self.sample.layout.leaves["RENDITIONS"]![0])].address
        let key = Int(read32(bytes, at: leaf + 16))
        put(UInt32(2 * CatalogWriter.xcode12KeyFormat.count - 1), in: &bytes, at: Self.sample.layout.tableAddress + 8 + 8 * key)
        XCTAssertTrue(complaint(bytes).contains("a RENDITIONS key of 41 bytes"))
        bytes = Self.sample.bytes
        let facetLeaf = Self.sample.layout.blocks[Int(Self.sample.layout.leaves["FACETKEYS"]![0])].address
        let value = Self.sample.layout.blocks[Int(read32(bytes, at: facetLeaf + 12))].address
        bytes[value + 4] = 4  // four attribute pairs in the room of three
        XCTAssertTrue(complaint(bytes).contains("a value of FACETKEYS"))
    }

    /// Every byte set to each of a few values: read or not, never a crash.
    func testDamagedBytesNeverCrash() {
        for offset in Self.sample.bytes.indices {
            for damage: UInt8 in [0x00, 0x01, 0x7F, 0xFF] {
                var bytes = Self.sample.bytes
                bytes[offset] = damage
                _ = try? AssetCatalog(bytes: bytes)
            }
        }
    }

    // MARK: helpers

    /// Where the block the variable names starts.
    func address(of variable: String) -> Int {
        Self.sample.layout.blocks[Int(Self.sample.layout.variables[variable]!)].address
    }

    func put(_ value: UInt32, in bytes: inout [UInt8], at offset: Int) {
        bytes[offset ..< offset + 4] = [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    func read32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        bytes[offset ..< offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
