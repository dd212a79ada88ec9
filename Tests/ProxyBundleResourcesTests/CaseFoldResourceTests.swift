import Foundation
import ProxyBundleResources
import XCTest

/// `resolve --casefold` and `check --casefold`: resources found by any spelling of their names,
/// and what letter case means to `check` when the mount folds case.
final class CaseFoldResourceTests: BundleTestCase {
    func folded(_ files: [String: String]) throws -> CaseFoldedTree {
        CaseFoldedTree(try DirectoryTree(path: try tree(files)))
    }

    func testAnySpellingFindsTheResourceByItsRealSpelling() throws {
        let files = ["Images/Icon.PNG": "", "Café.txt": "", "Localizable.strings": ""]
        let bundle = ResourceBundle(tree: try folded(files))
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "IMAGES/icon.png")), "Images/Icon.PNG")
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "icon", type: "png", subdirectory: "images")), "Images/Icon.PNG")
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "CAFE\u{301}", type: "TXT")), "Café.txt", "NFD, other case")
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "localizable.STRINGS")), "Localizable.strings")
        let exact = ResourceBundle(tree: try DirectoryTree(path: try tree(files)))
        XCTAssertNil(exact.resolve(ResourceQuery(name: "IMAGES/icon.png")), "without casefold, case matters")
        XCTAssertEqual(exact.resolve(ResourceQuery(name: "Images/Icon.PNG")), "Images/Icon.PNG")
    }

    /// Item 5 of issue 38: two spellings in one directory.
    func testSpellingsOfOneDirectoryMergeAndTheFirstFileServes() throws {
        let tree = try folded(["Data/a.txt": "upper", "data/b.txt": "lower", "data/A.TXT": "lower a", "x.txt": "small",
                               "X.txt": "capital", "Y": "file", "y/": ""])
        XCTAssertEqual(tree.names(in: "DATA"), ["A.TXT", "b.txt"], "one spelling of each name, the first in byte order")
        XCTAssertEqual(tree.contents(of: "data/a.txt", limit: 100).map { String(decoding: $0, as: UTF8.self) }, "lower a",
                       "A.TXT (in data/) comes before a.txt (in Data/)")
        XCTAssertEqual(tree.contents(of: "DATA/B.txt", limit: 100).map { String(decoding: $0, as: UTF8.self) }, "lower")
        XCTAssertEqual(tree.contents(of: "x.TXT", limit: 100).map { String(decoding: $0, as: UTF8.self) }, "capital")
        XCTAssertEqual(tree.kind(of: "y"), .file, "Y, a file, comes first: the directory y is unreachable")
        XCTAssertEqual(tree.spelling(of: "data/B.TXT"), "data/b.txt")
        XCTAssertEqual(tree.names(in: "").sorted(), ["Data", "X.txt", "Y"])
        XCTAssertNil(tree.kind(of: "data/missing"))
    }

    func findings(_ layers: [[String: String]], foldsCase: Bool) throws -> [Finding] {
        let paths = try layers.enumerated().map { try tree($0.element, "layer\($0.offset)") }
        return PatchCheck(tree: try LayeredTree(paths: paths), foldsCase: foldsCase).findings()
    }

    func testACaseOnlyDifferenceReplacesUnderCasefold() throws {
        let layers = [["Logo.jpg": "", "Images/ICON.PNG": ""], ["logo.jpg": "", "images/": ""]]
        XCTAssertEqual(try findings(layers, foldsCase: false).map(\.kind), [.letterCase, .letterCase])
        XCTAssertEqual(try findings(layers, foldsCase: true), [], "the patch's spelling replaces the main bundle's")
    }

    func testAWhiteoutHidesEverySpellingUnderCasefold() throws {
        let layers = [["Textures/.wh.Rock.dds": ""], ["textures/rock.DDS": ""]]
        XCTAssertEqual(try findings(layers, foldsCase: false).map(\.kind), [.letterCase, .whiteout],
                       "Textures beside textures, and a whiteout that hides nothing of its spelling")
        XCTAssertEqual(try findings(layers, foldsCase: true), [])
    }

    func testTwoSpellingsInOneLayerAreReported() throws {
        let found = try findings([["a.txt": "", "A.txt": "", "Sub/b": "", "sub/B": "", "dir/": "", "DIR/": ""],
                                  ["Readme": "", "README": "", "readme/": ""]], foldsCase: true)
        XCTAssertEqual(found.map { $0.text { $0 == 0 ? "patch" : "main" } }, [
            "Sub/b (patch): never shows under casefold, sub/B of the same layer has its name",
            "a.txt (patch): never shows under casefold, A.txt of the same layer has its name",
            "Readme (main): never shows under casefold, README of the same layer has its name",
            "readme (main): never shows under casefold, README of the same layer has its name",
        ], "directories of one name merge (DIR and dir are no finding), and so do their names")
        XCTAssertEqual(Set(found.map(\.kind)), [.spelling])
        XCTAssertEqual(try findings([["a.txt": "", "A.txt": ""], ["b": ""]], foldsCase: false), [],
                       "both show without casefold")
    }
}
