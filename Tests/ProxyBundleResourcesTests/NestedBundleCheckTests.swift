import CatalogWriter
import Foundation
import ProxyBundleResources
import XCTest

/// `check` in every bundle an app holds (issue 46): each kind of finding, in the main bundle
/// and in each bundle inside it (one and two levels down, a framework, an extension), by that
/// bundle's own rules, and named by it.
final class NestedBundleCheckTests: BundleTestCase {
    /// For a patch holding `patch` and a main bundle holding `main` (both relative to one bundle)
    /// in the app of `AppFixture`, in the main bundle and in each nested one: the findings are
    /// `expected` (kind and path, relative to that bundle), each naming the bundle.
    func assertFindings(_ expected: [(Finding.Kind, String)], patch: [String: String], main: [String: String] = [:],
                        catalog: [UInt8]? = nil, foldsCase: Bool = false, places: [String] = [""] + AppFixture.nested,
                        file: StaticString = #filePath, line: UInt = #line) throws {
        for place in places {
            let mainPath = try tree(AppFixture.main().merging(AppFixture.placed(main, at: place)) { $1 }, "main")
            if let catalog { try write(catalog, to: ResourcePath.join(mainPath, ResourcePath.join(place, "Assets.car"))) }
            let patchPath = try tree(AppFixture.placed(patch, at: place), "patch")
            let found = PatchCheck(tree: try LayeredTree(paths: [patchPath, mainPath]), foldsCase: foldsCase).findings()
            let texts = found.map { $0.text { ["patch", "main"][$0] } }
            XCTAssertEqual(found.map { "\($0.kind.rawValue) \($0.path)" },
                           expected.map { "\($0.0.rawValue) \(ResourcePath.join(place, $0.1))" },
                           "in '\(place)': \(texts)", file: file, line: line)
            let named = place.isEmpty ? nil : place
            XCTAssertEqual(found.map(\.bundle), found.map { _ in named }, "in '\(place)'", file: file, line: line)
            for text in texts where named != nil {
                XCTAssertTrue(text.contains("(patch, bundle \(place))") || text.contains("(main, bundle \(place))"), text,
                              file: file, line: line)
            }
        }
    }

    func testAnImageVariantSomeDevicesPassOver() throws {
        // a localized variant: the bundle's global image comes first, by that bundle's rules
        try assertFindings([(.image, "en.lproj/icon@2x.png"), (.image, "en.lproj/icon@2x.png")],
                           patch: ["en.lproj/icon@2x.png": ""], main: ["icon.png": "", "icon@2x.png": "", "icon@3x.png": ""])
    }

    func testALocalizedFileAGlobalOneBeats() throws {
        try assertFindings([(.localized, "en.lproj/Sharing.strings")],
                           patch: ["en.lproj/Sharing.strings": ""], main: ["Sharing.strings": ""])
    }

    func testAWhiteoutThatHidesNothing() throws {
        try assertFindings([(.whiteout, ".wh.never-there.png")], patch: [".wh.never-there.png": ""])
    }

    func testANameThatDiffersOnlyInCase() throws {
        try assertFindings([(.letterCase, "Config.json")], patch: ["Config.json": ""], main: ["config.json": ""])
    }

    func testSpellingsUnderCasefold() throws {
        try assertFindings([(.spelling, "notes.txt")], patch: ["Notes.txt": "", "notes.txt": ""], foldsCase: true)
    }

    /// The first case: `ShareKit.bundle/Localizable.strings` silences the bundle's
    /// localized copies.
    func testAGlobalFileOverLocalizedCopies() throws {
        try assertFindings([(.overridesLocalized, "Localizable.strings")], patch: ["Localizable.strings": ""],
                           main: ["en.lproj/Localizable.strings": "", "fr.lproj/Localizable.strings": ""])
    }

    /// A whole localization of the bundle removed: French users move to its English files (in
    /// the bundles that follow the app's choice, fr is the app's choice; the extension's own
    /// localizations are en and it, so there it is `it` that moves).
    func testAWhiteoutThatMovesLanguages() throws {
        try assertFindings([(.movesLanguage, ".wh.fr.lproj")], patch: [".wh.fr.lproj": ""],
                           main: ["fr.lproj/Main.nib/": "", "en.lproj/Main.nib/": ""], places: [""] + AppFixture.nested.dropLast())
        try assertFindings([(.movesLanguage, ".wh.it.lproj")], patch: [".wh.it.lproj": ""],
                           main: ["it.lproj/Main.nib/": "", "en.lproj/Main.nib/": ""], places: [AppFixture.appex])
    }

    func testALocalizationSpellingNoLanguageReaches() throws {
        try assertFindings([(.unreachableLocalization, "English.lproj/Sharing.strings")],
                           patch: ["English.lproj/Sharing.strings": ""],
                           main: ["en.lproj/Sharing.strings": "", "fr.lproj/Sharing.strings": ""])
    }

    /// The second case: a patched compiled storyboard that iPads never load, the bundle
    /// having its `~ipad` twin; and a file with its twin.
    func testAGenericResourceADeviceTwinBelowReplaces() throws {
        try assertFindings([(.deviceTwin, "GPPNativeShareBuilderImpl.storyboardc"), (.deviceTwin, "layout.json")],
                           patch: ["GPPNativeShareBuilderImpl.storyboardc/Info.plist": "patched", "layout.json": "{}"],
                           main: ["GPPNativeShareBuilderImpl.storyboardc/Info.plist": "",
                                  "GPPNativeShareBuilderImpl~ipad.storyboardc/Info.plist": ""])
    }

    /// The bundle's own asset catalog serves the image first.
    func testALooseImageTheBundlesCatalogServes() throws {
        try assertFindings([(.catalog, "share@2x.png")], patch: ["share@2x.png": ""],
                           catalog: CatalogWriter().add(name: "share", scale: 2, idiom: 0).add(name: "share", scale: 3, idiom: 0).bytes())
    }

    func testASourceFileTheAppNeverLoads() throws {
        try assertFindings([(.sourceOnly, "ShareView.xib")], patch: ["ShareView.xib": ""])
    }

    /// An unreadable catalog of a bundle the patch touches is said so.
    func testAnUnreadableCatalogOfTheBundle() throws {
        try assertFindings([(.unreadableCatalog, "Assets.car")], patch: ["new.json": ""],
                           catalog: Array("BOMStore-but-not-really".utf8))
    }

    /// With `CFBundleAllowMixedLocalizations` in the app's Info.plist, a bundle inside it
    /// chooses its own language: Italian users (whom the app has no localization for) got the
    /// bundle's Italian files, and a whiteout of them moves them. Without it, Italians get the
    /// app's choice, English, in every bundle: the same whiteout moves nothing.
    func testMixedLocalizationsLetABundleChooseItsOwnLanguage() throws {
        for (mixed, expected) in [(true, ["moves-language GooglePlus.bundle/.wh.it.lproj"]), (false, [])] {
            let info = AppFixture.app(mixed ? ["CFBundleAllowMixedLocalizations": "<true/>"] : [:])
            let main = try tree(AppFixture.main(appInfo: info).merging(
                AppFixture.placed(["it.lproj/Main.nib/": "", "en.lproj/Main.nib/": ""], at: AppFixture.level1)) { $1 }, "main")
            let patch = try tree([AppFixture.level1 + "/.wh.it.lproj": ""], "patch")
            let found = PatchCheck(tree: try LayeredTree(paths: [patch, main])).findings()
            XCTAssertEqual(found.map { "\($0.kind.rawValue) \($0.path)" }, expected, "mixed: \(mixed)")
            if mixed {
                XCTAssertEqual(found.first?.text { ["patch", "main"][$0] },
                               "GooglePlus.bundle/.wh.it.lproj (patch, bundle GooglePlus.bundle): changes the localization "
                               + "languages get: it: it.lproj/Main.nib to en.lproj/Main.nib")
            }
        }
    }

    /// A macOS app: its framework's resources are `Versions/A/Resources` (through the
    /// `Resources` symlink), and a Mac has no idiom and scales 1 and 2.
    func testAMacOSFrameworkAndTheDevicesOfAMac() throws {
        let kit = "Contents/Frameworks/Kit.framework"
        let main = try tree(["Contents/Info.plist": AppFixture.info(["CFBundleDevelopmentRegion": "<string>en</string>"]),
                             "Contents/Resources/en.lproj/InfoPlist.strings": "",
                             "Contents/Resources/icon.png": "", "Contents/Resources/icon@2x.png": "",
                             "Contents/Resources/icon@3x.png": "", "Contents/Resources/layout~ipad.json": "",
                             kit + "/Versions/A/Resources/Info.plist": AppFixture.info(["CFBundleDevelopmentRegion": "<string>en</string>"]),
                             kit + "/Versions/A/Resources/en.lproj/Kit.strings": "",
                             kit + "/Versions/A/Resources/fr.lproj/Kit.strings": "",
                             kit + "/Versions/Current": "->A", kit + "/Resources": "->Versions/Current/Resources"], "main")
        let patch = try tree([kit + "/Versions/A/Resources/Kit.strings": "", "Contents/Resources/icon@2x.png": "",
                              "Contents/Resources/layout.json": ""], "patch")
        let check = PatchCheck(tree: try LayeredTree(paths: [patch, main]))
        XCTAssertEqual(check.devices, [Device(scale: 1, idiom: nil), Device(scale: 2, idiom: nil)])
        XCTAssertEqual(check.findings().map { $0.text(checked: check.devices) { ["patch", "main"][$0] } }, [
            kit + "/Versions/A/Resources/Kit.strings (patch, bundle \(kit)): a global file over localized copies below; en, fr "
                + "now load it instead of en.lproj/Kit.strings, fr.lproj/Kit.strings",
            "Contents/Resources/icon@2x.png (patch): on scale 1 devices, Contents/Resources/icon.png from main loads instead",
        ], "no Mac has scale 3, and none loads ~ipad twins")
    }
}
