import Foundation
import ProxyBundleResources
import XCTest

/// The language search list as CoreFoundation builds it, one row per rule, each naming where the
/// rule comes from. The answers are those of Apple's CoreFoundation and ICU (the issue's
/// independent reference agreed on each).
final class LanguageSearchListTests: BundleTestCase {
    struct Row {
        var rule: String
        var preferred: [String]
        var lproj: [String]
        var developmentRegion: String?
        var expected: [String]
        var against: LanguageSearchList.Preferences = .user
    }

    static let rows: [Row] = [
        Row(rule: "ualoc: the first match, then the development region appended (CopyLanguageSearchListInBundle)",
            preferred: ["fr-CA"], lproj: ["Base", "fr", "en"], developmentRegion: "en", expected: ["fr", "en"]),
        Row(rule: "ualoc: script from likely subtags", preferred: ["zh-Hans-CN"], lproj: ["zh-Hans", "zh-Hant", "en"],
            developmentRegion: "en", expected: ["zh-Hans", "en"]),
        Row(rule: "ualoc: zh_HK is Traditional", preferred: ["zh-Hant-HK"], lproj: ["zh-Hans", "zh-Hant", "en"],
            developmentRegion: "en", expected: ["zh-Hant", "en"]),
        Row(rule: "ualoc: zh_CN is zh_Hans_CN", preferred: ["zh-Hans"], lproj: ["zh_CN", "zh_HK", "zh_TW", "en"],
            developmentRegion: "en", expected: ["zh_CN", "en"]),
        Row(rule: "ualoc: zh_TW is zh_Hant_TW", preferred: ["zh-Hant"], lproj: ["zh_CN", "zh_HK", "zh_TW", "en"],
            developmentRegion: "en", expected: ["zh_TW", "en"]),
        Row(rule: "ualoc: backup match through likely subtags", preferred: ["hi"], lproj: ["hi-IN", "en"],
            developmentRegion: "en", expected: ["hi-IN", "en"]),
        Row(rule: "ualoc: a region-only localization", preferred: ["el"], lproj: ["el_GR", "en"],
            developmentRegion: "en", expected: ["el_GR", "en"]),
        Row(rule: "ualoc: Apple's parent en_IN -> en_GB", preferred: ["en-IN"], lproj: ["en_GB", "en"],
            developmentRegion: "en", expected: ["en_GB", "en"]),
        Row(rule: "ualoc: en_NZ -> en_AU -> en_GB -> en", preferred: ["en-NZ"], lproj: ["en", "en_GB", "en_AU"],
            developmentRegion: "en", expected: ["en_AU", "en_GB", "en"]),
        Row(rule: "ualoc: one match, never a second preferred language", preferred: ["fa", "fr"], lproj: ["fa", "fr", "en"],
            developmentRegion: "en", expected: ["fa", "en"]),
        Row(rule: "ualoc: the alias iw is he", preferred: ["he"], lproj: ["iw", "en"], developmentRegion: "en",
            expected: ["iw", "en"]),
        Row(rule: "PreferredLanguagesInList: the development region when nothing matches (a legacy name)",
            preferred: ["de"], lproj: ["English", "French"], developmentRegion: "English", expected: ["English"],
            against: .fallback),
        Row(rule: "PreferredLanguagesInList: en_US as the backstop; no development region: en appended if present",
            preferred: ["ja"], lproj: ["fr", "en"], developmentRegion: nil, expected: ["en"], against: .fallback),
        Row(rule: "CopyLanguageSearchListInBundle: the first localization when nothing else matched",
            preferred: ["ja"], lproj: ["fr", "de"], developmentRegion: nil, expected: ["de"], against: .fallback),
        Row(rule: "CopyLanguageSearchListInBundle: en when the bundle has no localization", preferred: ["ja"], lproj: [],
            developmentRegion: nil, expected: ["en"], against: .fallback),
        Row(rule: "copyBundleLocalizationsFromResources: Base.lproj adds the development region",
            preferred: ["de"], lproj: ["Base", "fr"], developmentRegion: "en", expected: ["en"], against: .fallback),
        Row(rule: "the user's default (no preference set) is en", preferred: [], lproj: ["de", "en"],
            developmentRegion: "de", expected: ["en", "de"]),
    ]

    func testEveryRow() throws {
        for row in Self.rows {
            var files: [String: String] = [:]
            for name in row.lproj { files[name + ".lproj/"] = "" }
            let root = try tree(files)
            if let region = row.developmentRegion {
                try add(["Info.plist": plist(["CFBundleDevelopmentRegion": region])], to: root)
            }
            let bundle = ResourceBundle(tree: try DirectoryTree(path: root))
            let list = bundle.searchList(preferred: ResourceQuery(name: "x", languages: row.preferred).preferred)
            XCTAssertEqual(list.languages, row.expected, row.rule)
            XCTAssertEqual(list.matchedAgainst, row.against, row.rule)
        }
    }

    func testLookupOrderIsGlobalFirstMatchBaseThenTheRest() throws {
        let root = try tree(["Base.lproj/Main.nib/": "", "fr.lproj/Main.nib/": "", "en.lproj/Main.nib/": "",
                             "fr_CA.lproj/": "", "Info.plist": plist(["CFBundleDevelopmentRegion": "en"])])
        let bundle = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(bundle.locations(subdirectory: "", languages: bundle.searchList(preferred: ["fr-CA"]).languages),
                       ["", "fr_CA.lproj", "Base.lproj", "fr.lproj", "en.lproj"], "fr_CA's parent fr follows Base")
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "Main", type: "nib", languages: ["fr-CA"])), "Base.lproj/Main.nib",
                       "Base.lproj comes right after the first matched localization, before fr")
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "Main", type: "nib", languages: ["fr"])), "fr.lproj/Main.nib")
    }

    func testANestedBundleFollowsTheMainBundleUnlessMixedLocalizationsAreAllowed() throws {
        let root = try tree(["fr.lproj/": "", "en.lproj/": "", "Info.plist": plist(["CFBundleDevelopmentRegion": "en"]),
                             "Kit.bundle/de.lproj/L.strings": "", "Kit.bundle/fr.lproj/L.strings": "",
                             "Kit.bundle/en.lproj/L.strings": ""])
        let tree = try DirectoryTree(path: root)
        let main = ResourceBundle(tree: tree)
        let kit = ResourceBundle(tree: tree, path: "Kit.bundle", main: main)
        let list = kit.searchList(preferred: ["de", "fr"])
        XCTAssertEqual(list.languages, ["fr", "en"], "the app chose fr (it has no de); the nested bundle follows")
        XCTAssertEqual(list.matchedAgainst, .mainBundle)
        XCTAssertEqual(kit.resolve(ResourceQuery(name: "L.strings", languages: ["de", "fr"])), "Kit.bundle/fr.lproj/L.strings")
        XCTAssertEqual(main.nestedBundles.first?.resolve(ResourceQuery(name: "L.strings", languages: ["de", "fr"])),
                       "Kit.bundle/fr.lproj/L.strings", "--all-bundles' nested bundles follow the main bundle too")

        try FileManager.default.removeItem(atPath: root + "/Info.plist")
        try add(["Info.plist": mixed], to: root)
        let mixedTree = try DirectoryTree(path: root)
        let alone = ResourceBundle(tree: mixedTree, path: "Kit.bundle", main: ResourceBundle(tree: mixedTree))
        XCTAssertEqual(alone.searchList(preferred: ["de", "fr"]).languages, ["de", "en"],
                       "CFBundleAllowMixedLocalizations: the nested bundle matches the user's languages itself")
        XCTAssertEqual(alone.searchList(preferred: ["de", "fr"]).matchedAgainst, .user)
    }

    /// An Info.plist that allows mixed localizations, as a boolean.
    let mixed = """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>CFBundleAllowMixedLocalizations</key><true/>
        </dict></plist>
        """

    func testPredefinedLocalizationsComeFirst() throws {
        let root = try tree(["de.lproj/": "", "Info.plist": """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>
            <key>CFBundleLocalizations</key><array><string>pt-BR</string><integer>3</integer><string></string></array>
            </dict></plist>
            """])
        let bundle = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(bundle.localizations, ["pt-BR", "de"], "only non-empty strings of CFBundleLocalizations, then the .lproj")
        XCTAssertEqual(bundle.searchList(preferred: ["pt"]).languages, ["pt-BR"])
    }

    func testLanguageNamesThatAreNotLanguagesAreRefused() {
        for good in ["fr", "fr-CA", "zh_Hant_TW", "English", "es-419"] { XCTAssertTrue(Localizations.isValid(good), good) }
        for bad in ["../../x", "/etc", "en US", "", "-en", "en-", "fr.lproj", "é"] { XCTAssertFalse(Localizations.isValid(bad), bad) }
    }
}
