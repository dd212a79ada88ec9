import CatalogWriter
import Foundation
import ProxyBundleResources
import XCTest

/// `proxybundle check`'s findings, one kind at a time, on plain layer directories.
final class PatchCheckTests: BundleTestCase {
    func findings(_ layers: [[String: String]], devices: [Device] = Device.checked) throws -> [Finding] {
        let paths = try layers.enumerated().map { try tree($0.element, "layer\($0.offset)") }
        return PatchCheck(tree: try LayeredTree(paths: paths), devices: devices).findings()
    }

    func texts(_ found: [Finding], devices: [Device] = Device.checked) -> [String] {
        found.map { $0.text(checked: devices) { $0 == 0 ? "patch" : "main" } }
    }

    static let icons = ["Images/icon.png": "", "Images/icon@2x.png": "", "Images/icon@3x.png": ""]

    func testAVariantThatSomeDevicesPassOver() throws {
        let found = try findings([["Images/icon@2x.png": "new"], Self.icons])
        XCTAssertEqual(texts(found), ["Images/icon@2x.png (patch): on scale 3 devices, Images/icon@3x.png from main loads instead"],
                       "scale 1 is not checked by default: no current iOS device has it")
        XCTAssertEqual(found.map(\.kind), [.image])
        XCTAssertEqual(found.first?.devices, [Device(scale: 3, idiom: .phone), Device(scale: 3, idiom: .pad)])
        let all = try findings([["Images/icon@2x.png": "new"], Self.icons], devices: Device.all)
        XCTAssertEqual(texts(all, devices: Device.all), [
            "Images/icon@2x.png (patch): on scale 1 devices, Images/icon.png from main loads instead",
            "Images/icon@2x.png (patch): on scale 3 devices, Images/icon@3x.png from main loads instead",
        ])
        XCTAssertEqual(try findings([["Images/icon@2x.png": "new"], Self.icons], devices: [Device(scale: 2, idiom: .pad)]), [])
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
                                  ["splash-568h@2x.png": "", "splash@2x~ipad.png": ""]], devices: Device.all)
        XCTAssertEqual(texts(found, devices: Device.all), [
            "splash.png, splash@2x.png, splash@3x.png (patch): on scale 2 tall-phone devices, splash-568h@2x.png from main loads instead",
            "splash.png, splash@2x.png, splash@3x.png (patch): on scale 2 pad devices, splash@2x~ipad.png from main loads instead",
        ], "every 4-inch phone is scale 2: no other tall device is checked")
    }

    func testALocalizedFileAGlobalOneBeats() throws {
        let found = try findings([["en.lproj/Localizable.strings": "", "en.lproj/Only.strings": "",
                                   "Sub/fr.lproj/x.json": "", "en.lproj/icon@2x.png": ""],
                                  ["Localizable.strings": "", "Sub/x.json": "", "icon.png": ""]])
        XCTAssertEqual(texts(found), [
            "en.lproj/Localizable.strings (patch): never loads, the global Localizable.strings from main always comes first",
            "en.lproj/icon@2x.png (patch): on every device, icon.png from main loads instead",
        ], "en.lproj/Only.strings has no global file to lose to; Sub/fr.lproj is no localization (only a .lproj of "
            + "the resources directory is)")
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
        let found = PatchCheck(tree: try LayeredTree(paths: paths), devices: Device.all).findings()
        let text = found.map { $0.text(checked: Device.all) { ["hotfix", "base", "main"][$0] } }
        XCTAssertEqual(text, [
            "Images/icon@3x.png (hotfix): on scale 1 devices, Images/icon.png from main loads instead",
            "Images/icon@3x.png (hotfix): on scale 2 devices, Images/icon@2x.png from base loads instead",
            "Images/icon@2x.png (base): on scale 1 devices, Images/icon.png from main loads instead",
        ], "the base's a.txt, which the hotfix replaces, is not a finding; nor is the base's whiteout")
    }

    func testAGlobalFileOverLocalizedCopies() throws {
        let found = try findings([["Localizable.strings": "", "Other.strings": ""],
                                  ["fr.lproj/Localizable.strings": "", "de.lproj/Localizable.strings": "", "Other.strings": ""]])
        XCTAssertEqual(texts(found), ["Localizable.strings (patch): a global file over localized copies below; de, fr now "
                                      + "load it instead of de.lproj/Localizable.strings, fr.lproj/Localizable.strings"],
                       "Other.strings replaces a global file: nothing changes for any language")
        XCTAssertEqual(found.first?.languages, ["de", "fr"])
    }

    func testAWhiteoutThatMovesLanguages() throws {
        let main = ["Base.lproj/Main.nib/": "", "fr.lproj/Main.nib/": "", "fr_CA.lproj/Main.nib/": "", "en.lproj/Main.nib/": "",
                    "Info.plist": plist(["CFBundleDevelopmentRegion": "en"])]
        let found = try findings([["fr_CA.lproj/.wh.Main.nib": ""], main])
        XCTAssertEqual(texts(found), ["fr_CA.lproj/.wh.Main.nib (patch): changes the localization languages get: "
                                      + "fr-CA: fr_CA.lproj/Main.nib to Base.lproj/Main.nib"],
                       "Base.lproj comes right after fr_CA, before fr")
        XCTAssertEqual(found.first?.kind, .movesLanguage)
        XCTAssertEqual(found.first?.languages, ["fr-CA"])
        let whole = try findings([[".wh.fr.lproj": ""], main])
        XCTAssertEqual(texts(whole), [".wh.fr.lproj (patch): changes the localization languages get: "
                                      + "fr: fr.lproj/Main.nib to fr_CA.lproj/Main.nib"],
                       "with fr gone, ICU matches fr to fr_CA")
    }

    func testANewLocalizationThatMovesItsLanguageElsewhere() throws {
        let main = ["Base.lproj/Main.nib/": "", "fr.lproj/Main.nib/": "", "fr.lproj/Localizable.strings": "",
                    "en.lproj/Main.nib/": "", "Info.plist": plist(["CFBundleDevelopmentRegion": "en"])]
        let found = try findings([["fr_CA.lproj/Localizable.strings": ""], main])
        XCTAssertEqual(texts(found), ["fr_CA.lproj (patch): changes the localization languages get: "
                                      + "fr-CA: fr.lproj/Main.nib to Base.lproj/Main.nib"],
                       "the patch's own Localizable.strings is what it means; Main.nib moving to Base.lproj is not")
        XCTAssertEqual(try findings([["fr_CA.lproj/Localizable.strings": "", "fr_CA.lproj/Main.nib/": ""], main]), [],
                       "a patch that provides everything its new localization touches")
    }

    func testALocalizationSpellingNoLanguageReaches() throws {
        let found = try findings([["English.lproj/Localizable.strings": ""],
                                  ["en.lproj/Localizable.strings": "", "fr.lproj/Localizable.strings": ""]])
        XCTAssertEqual(texts(found), ["English.lproj/Localizable.strings (patch): never loads, for en "
                                      + "en.lproj/Localizable.strings from main comes first"])
        XCTAssertEqual(found.first?.kind, .unreachableLocalization)
    }

    func testAGenericFileADeviceTwinBelowReplaces() throws {
        let found = try findings([["layout.json": "", "both.json": "", "both~ipad.json": ""],
                                  ["layout.json": "", "layout~ipad.json": "", "both.json": "", "both~ipad.json": ""]])
        XCTAssertEqual(texts(found), ["layout.json (patch): on scale 2 pad, scale 3 pad devices, layout~ipad.json from main loads instead"],
                       "both.json comes with its own twin")
        XCTAssertEqual(try findings([["layout.json": ""], ["layout.json": "", "layout~ipad.json": ""]],
                                    devices: [Device(scale: 3, idiom: .phone)]), [], "no pad is checked")
    }

    func testLooseImagesTheCatalogServes() throws {
        let main = try tree(["Images/logo.png": ""], "main")
        try write(CatalogWriter().add(name: "icon", scale: 2, idiom: 1).add(name: "icon", scale: 3, idiom: 0)
                  .add(name: "Images/logo", scale: 0, idiom: 0).bytes(), to: main + "/Assets.car")
        let patch = try tree(["icon@2x.png": "", "icon@3x.png": "", "Images/logo@2x.png": "", "banner@2x.png": ""], "patch")
        let found = PatchCheck(tree: try LayeredTree(paths: [patch, main])).findings()
        XCTAssertEqual(found.map(\.kind), [.catalog, .catalog], found.map { $0.text { String($0) } }.joined(separator: "\n"))
        XCTAssertEqual(found.first?.text { ["patch", "main"][$0] },
                       "Images/logo@2x.png (patch): never loads on every device, Assets.car from main has it (Images/logo; "
                       + "scale 2 phone: vector, universal, appearance 0; scale 2 pad: vector, universal, appearance 0; "
                       + "scale 3 phone: vector, universal, appearance 0; scale 3 pad: vector, universal, appearance 0)")
        XCTAssertEqual(found.last?.devices, [Device(scale: 2, idiom: .phone), Device(scale: 3, idiom: .phone),
                                             Device(scale: 3, idiom: .pad)], "icon: no 2x pad rendition in the catalog")
    }

    func testAnUnreadableCatalogIsSaidSoNeverTakenForEmpty() throws {
        let main = try tree(["icon@2x.png": ""], "main")
        try write(Array("BOMStore-but-not-really".utf8), to: main + "/Assets.car")
        let patch = try tree(["icon@2x.png": ""], "patch")
        let found = PatchCheck(tree: try LayeredTree(paths: [patch, main])).findings()
        XCTAssertEqual(found.map(\.kind), [.unreadableCatalog])
        XCTAssertTrue(found.first?.text { ["patch", "main"][$0] }.hasPrefix("Assets.car (main): unreadable asset catalog") ?? false)
    }

    func testSourceFilesNeverLoad() throws {
        let found = try findings([["Base.lproj/Main.storyboard": "", "View.xib": "", "Media.xcassets/icon.imageset/a.png": "",
                                   "Localizable.xcstrings": "", "Main.storyboardc/x.nib": ""], ["a": ""]])
        XCTAssertEqual(texts(found), [
            "Base.lproj/Main.storyboard (patch): never loads, the app loads only its compiled form (.storyboardc)",
            "Localizable.xcstrings (patch): never loads, the app loads only its compiled form (.strings in each .lproj)",
            "Media.xcassets (patch): never loads, the app loads only its compiled form (Assets.car)",
            "View.xib (patch): never loads, the app loads only its compiled form (.nib)",
        ], "a compiled storyboard is no finding; the catalog's folder is one finding, not one per file")
    }

    /// A patch that replaces what it touches with everything the devices and languages need.
    func testNothingOfAPatchThatProvidesEverything() throws {
        let main = ["Base.lproj/Main.nib/": "", "en.lproj/Localizable.strings": "", "fr.lproj/Localizable.strings": "",
                    "layout.json": "", "layout~ipad.json": "", "Info.plist": plist(["CFBundleDevelopmentRegion": "en"])]
        let patch = ["en.lproj/Localizable.strings": "", "fr.lproj/Localizable.strings": "", "de.lproj/Localizable.strings": "",
                     "layout.json": "", "layout~ipad.json": "", "Images/new@2x.png": "", "Images/new@3x.png": ""]
        XCTAssertEqual(texts(try findings([patch, main.merging(Self.icons) { a, _ in a }])), [])
    }
}
