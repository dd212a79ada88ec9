import Foundation
import ProxyBundleCore
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

    /// The layers below are merged by the folding rules too: a whiteout of another spelling
    /// in a patch between already hides the main bundle's file.
    func testWhiteoutsBelowAreReadByTheFoldingRules() throws {
        let layers = [["textures/.wh.rock.dds": ""], ["textures/.wh.Rock.dds": ""], ["textures/rock.dds": ""]]
        XCTAssertEqual(try findings(layers, foldsCase: false).map { "\($0.layer) \($0.path)" }, ["1 textures/.wh.Rock.dds"])
        XCTAssertEqual(try findings(layers, foldsCase: true).map { "\($0.layer) \($0.path)" }, ["0 textures/.wh.rock.dds"])
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

/// Layers merged in-process as a mount that folds case merges them (`FoldedLayers`).
final class FoldedLayersTests: BundleTestCase {
    func layers(_ trees: [[String: String]]) throws -> FoldedLayers {
        FoldedLayers(layers: try trees.enumerated().map { try Layer(path: try tree($0.element, "layer\($0.offset)")) })
    }

    func text(_ tree: FoldedLayers, _ path: String) -> String? {
        tree.contents(of: path, limit: 100).map { String(decoding: $0, as: UTF8.self) }
    }

    func testDirectoriesOfTwoLayersMergeAndTheHighestSpellingShows() throws {
        let tree = try layers([["Data/Textures/Rock.DDS": "mod", "Data/new.txt": "mod"],
                               ["data/textures/rock.dds": "game", "data/textures/sand.dds": "game", "data/OLD.txt": "game"]])
        XCTAssertEqual(tree.names(in: "DATA").sorted(), ["OLD.txt", "Textures", "new.txt"])
        XCTAssertEqual(text(tree, "data/TEXTURES/rock.dds"), "mod")
        XCTAssertEqual(text(tree, "DATA/textures/SAND.DDS"), "game")
        XCTAssertEqual(tree.spelling(of: "data/textures/sand.dds"), "Data/Textures/sand.dds")
        XCTAssertEqual(tree.layer(of: "data/old.TXT"), 1)
        XCTAssertEqual(tree.find("DATA")?.places.map(\.path), ["Data", "data"])
    }

    func testWhiteoutsAndOpaqueDirectoriesHideEverySpelling() throws {
        let tree = try layers([["Data/.wh.ROCK.dds": "", "Maps/.wh..wh..opq": "", "Maps/one": "mod"],
                               ["data/rock.DDS": "", "data/keep": "", "MAPS/two": "game"]])
        XCTAssertNil(tree.kind(of: "data/rock.dds"))
        XCTAssertEqual(tree.names(in: "data"), ["keep"])
        XCTAssertEqual(tree.names(in: "maps"), ["one"])
    }

    /// The Wine-like acceptance test, on the model: every file of every layer, opened by its
    /// path re-cased at random, is found (the served one of its name).
    func testEveryFileOfEveryLayerIsFoundByARandomlyRecasedPath() throws {
        let trees: [[String: String]] = [
            ["Data/Meshes/Armor.NIF": "", "Data/readme.TXT": "", "Straße/Ölfass.dds": ""],
            ["data/meshes/armor.nif": "", "data/Meshes/Helmet.nif": "", "DATA/Sounds/FX/Hit.wav": "", "STRASSE/x": ""],
        ]
        let tree = try layers(trees)
        var generator = SystemRandomNumberGenerator()
        for files in trees {
            for path in files.keys {
                let recased = path.map { Bool.random(using: &generator) ? $0.uppercased() : $0.lowercased() }.joined()
                XCTAssertEqual(tree.kind(of: recased), .file, "\(path) as \(recased)")
            }
        }
    }
}
