import ProxyBundleResources
import XCTest

/// `proxybundle check`'s findings, one kind at a time, on plain layer directories.
final class PatchCheckTests: BundleTestCase {
    func findings(_ layers: [[String: String]]) throws -> [Finding] {
        let paths = try layers.enumerated().map { try tree($0.element, "layer\($0.offset)") }
        return PatchCheck(tree: try LayeredTree(paths: paths)).findings()
    }

    func texts(_ found: [Finding]) -> [String] {
        found.map { $0.text { $0 == 0 ? "patch" : "main" } }
    }

    static let icons = ["Images/icon.png": "", "Images/icon@2x.png": "", "Images/icon@3x.png": ""]

    func testAVariantThatSomeDevicesPassOver() throws {
        let found = try findings([["Images/icon@2x.png": "new"], Self.icons])
        XCTAssertEqual(texts(found), [
            "Images/icon@2x.png (patch): on scale 1 devices, Images/icon.png from main loads instead",
            "Images/icon@2x.png (patch): on scale 3 devices, Images/icon@3x.png from main loads instead",
        ])
        XCTAssertEqual(found.map(\.kind), [.image, .image])
        XCTAssertEqual(found[1].devices.count, 4)
    }

    func testNothingOfAPatchThatProvidesEveryVariant() throws {
        XCTAssertEqual(try findings([Self.icons, Self.icons]), [])
        XCTAssertEqual(try findings([["Images/banner.png": "", "Images/banner@3x.png": ""], Self.icons]), [],
                       "an image the main bundle does not have")
        XCTAssertEqual(try findings([["Images/icon.png": "", "Images/icon@2x.png": "", "Images/icon@3x.png": "",
                                      "Images/icon~ipad.png": ""], Self.icons]), [])
    }

    func testTallAndPadVariantsBelow() throws {
        let found = try findings([["splash.png": "", "splash@2x.png": "", "splash@3x.png": ""],
                                  ["splash-568h@2x.png": "", "splash@2x~ipad.png": ""]])
        XCTAssertEqual(texts(found), [
            "splash.png, splash@2x.png, splash@3x.png (patch): on scale 2 tall devices, splash-568h@2x.png from main loads instead",
            "splash.png, splash@2x.png, splash@3x.png (patch): on scale 2 pad not tall devices, splash@2x~ipad.png from main loads instead",
        ], "a tall device of scale 1 finds the patch's splash.png before any scale-2 variant")
    }

    func testALocalizedFileAGlobalOneBeats() throws {
        let found = try findings([["en.lproj/Localizable.strings": "", "en.lproj/Only.strings": "",
                                   "Sub/fr.lproj/x.json": "", "en.lproj/icon@2x.png": ""],
                                  ["Localizable.strings": "", "Sub/x.json": "", "icon.png": ""]])
        XCTAssertEqual(texts(found), [
            "Sub/fr.lproj/x.json (patch): never loads, the global Sub/x.json from main always comes first",
            "en.lproj/Localizable.strings (patch): never loads, the global Localizable.strings from main always comes first",
            "en.lproj/icon@2x.png (patch): on every device, icon.png from main loads instead",
        ], "in byte order of the paths; en.lproj/Only.strings has no global file to lose to")
    }

    func testWhiteoutsThatHideNothing() throws {
        let found = try findings([["Images/.wh.splash.png": "", "Images/.wh.gone.png": "", ".wh.nothing": "",
                                   "Fonts.bundle/.wh..wh..opq": "", "New/.wh..wh..opq": "", ".wh..wh.work/": ""],
                                  ["Images/splash.png": "", "Fonts.bundle/Bold.ttf": ""]])
        XCTAssertEqual(Set(found.map(\.path)), [".wh.nothing", "Images/.wh.gone.png", "New/.wh..wh..opq"])
        XCTAssertEqual(Set(found.map(\.kind)), [.whiteout])
    }

    func testNamesThatDifferOnlyInCase() throws {
        let found = try findings([["Logo.jpg": "", "Images/ICON.PNG": "", "same.txt": ""],
                                  ["logo.jpg": "", "images/": "", "same.txt": ""]])
        XCTAssertEqual(texts(found), [
            "Logo.jpg (patch): differs only in letter case from logo.jpg from main; both show, nothing is replaced",
            "Images (patch): differs only in letter case from images from main; both show, nothing is replaced",
        ].sorted())
    }

    func testStackedPatchesAreCheckedEachAgainstWhatLiesBelow() throws {
        let paths = try [["Images/icon@3x.png": "", "a.txt": ""], ["Images/icon@2x.png": "", "a.txt": "", ".wh.b": ""],
                         Self.icons.merging(["b": ""]) { a, _ in a }].enumerated().map { try tree($0.element, "l\($0.offset)") }
        let found = PatchCheck(tree: try LayeredTree(paths: paths)).findings()
        let text = found.map { $0.text { ["hotfix", "base", "main"][$0] } }
        XCTAssertEqual(text, [
            "Images/icon@3x.png (hotfix): on scale 1 devices, Images/icon.png from main loads instead",
            "Images/icon@3x.png (hotfix): on scale 2 devices, Images/icon@2x.png from base loads instead",
            "Images/icon@2x.png (base): on scale 1 devices, Images/icon.png from main loads instead",
        ], "the base's a.txt, which the hotfix replaces, is not a finding; nor is the base's whiteout")
    }
}
