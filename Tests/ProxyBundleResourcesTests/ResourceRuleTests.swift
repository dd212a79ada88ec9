import CatalogWriter
import Foundation
import ProxyBundleResources
import XCTest

/// The lookup rules of `proxybundle resolve`, one test each, on plain directories.
final class ResourceRuleTests: BundleTestCase {
    func bundle(_ files: [String: String]) throws -> ResourceBundle {
        ResourceBundle(tree: try DirectoryTree(path: try tree(files)))
    }

    func testResourcesDirectoryByLayout() throws {
        let macOS = try bundle(["Contents/Resources/a.txt": "", "Resources/a.txt": "", "a.txt": ""])
        XCTAssertEqual(macOS.resources, "Contents/Resources")
        XCTAssertEqual(macOS.resolve(ResourceQuery(name: "a", type: "txt")), "Contents/Resources/a.txt")
        let openStep = try bundle(["Resources/a.txt": "", "a.txt": ""])
        XCTAssertEqual(openStep.resolve(ResourceQuery(name: "a.txt")), "Resources/a.txt")
        let iOS = try bundle(["a.txt": ""])
        XCTAssertEqual(iOS.resources, "")
        XCTAssertEqual(iOS.resolve(ResourceQuery(name: "a.txt")), "a.txt")
    }

    func testNameTypeAndSubdirectory() throws {
        let b = try bundle(["Fonts.bundle/Regular.ttf": "", "Images/icon.png": "", "Images/Sub/x.json": "", "icon.png": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Fonts.bundle/Regular.ttf")), "Fonts.bundle/Regular.ttf")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Images/icon.png")), "Images/icon.png")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "icon", type: "png", subdirectory: "Images")), "Images/icon.png")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Sub/x", type: "json", subdirectory: "Images")), "Images/Sub/x.json")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "icon", type: "png")), "icon.png")
        XCTAssertNil(b.resolve(ResourceQuery(name: "icon", type: "jpg")))
    }

    func testGlobalResourcesBeatLocalizedOnes() throws {
        let b = try bundle(["en.lproj/Localizable.strings": "", "Localizable.strings": "", "fr.lproj/Only.strings": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Localizable.strings", languages: ["en"])), "Localizable.strings")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Only.strings", languages: ["fr"])), "fr.lproj/Only.strings")
    }

    func testTheSearchListPicksOneLocalizationThenTheDevelopmentRegion() throws {
        let b = try bundle(["fr.lproj/a.txt": "", "fr_CA.lproj/b.txt": "", "de.lproj/a.txt": "", "de.lproj/e.txt": "",
                            "English.lproj/e.txt": "", "en.lproj/f.txt": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "a.txt", languages: ["de", "fr"])), "de.lproj/a.txt")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "b.txt", languages: ["fr-CA"])), "fr_CA.lproj/b.txt")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "a.txt", languages: ["fr-CA", "de"])), "fr.lproj/a.txt",
                       "fr_CA's parent fr follows it in the search list")
        XCTAssertNil(b.resolve(ResourceQuery(name: "e.txt", languages: ["fr-CA", "de"])),
                     "a second preferred language (de) is never searched, nor a legacy name not chosen")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "f.txt", languages: ["fr"])), "en.lproj/f.txt",
                       "with no development region, en is appended when the bundle has it")
        XCTAssertEqual(b.locations(subdirectory: "Sub", languages: b.searchList(preferred: ["ja"]).languages),
                       ["Sub", "English.lproj/Sub", "Base.lproj/Sub", "en.lproj/Sub"], "nothing matches ja: en_US's matches")
    }

    func testBaseThenDevelopmentRegionFromInfoPlist() throws {
        let root = try tree(["Base.lproj/Main.nib": "", "es.lproj/Main.nib": "", "es.lproj/Other.nib": "",
                             "en.lproj/Other.nib": ""])
        try add(["Info.plist": plist(["CFBundleDevelopmentRegion": "es"])], to: root)
        let b = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(b.info.developmentRegion, "es")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Main.nib", languages: ["de"])), "es.lproj/Main.nib",
                       "nothing matches de: the development region is the first localization, Base after it")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Other.nib", languages: ["de"])), "es.lproj/Other.nib")
        XCTAssertEqual(b.locations(subdirectory: "", languages: b.searchList(preferred: ["es"]).languages),
                       ["", "es.lproj", "Base.lproj"], "a development region already chosen is not tried again")
    }

    func testDevelopmentRegionFromABinaryInfoPlistAndEachLayout() throws {
        let ios = try directory()
        try write(PropertyListTests.binary, to: ios + "/Info.plist")
        XCTAssertEqual(ResourceBundle(tree: try DirectoryTree(path: ios)).info.developmentRegion, "fr")
        let macOS = try tree(["Contents/Resources/": ""])
        try write(PropertyListTests.binary, to: macOS + "/Contents/Info.plist")
        XCTAssertEqual(ResourceBundle(tree: try DirectoryTree(path: macOS)).info.developmentRegion, "fr")
        let gnustep = try tree(["Resources/Info-gnustep.plist": plist(["CFBundleDevelopmentRegion": "de"])])
        XCTAssertEqual(ResourceBundle(tree: try DirectoryTree(path: gnustep)).info.developmentRegion, "de")
        XCTAssertNil(try bundle(["a": ""]).info.developmentRegion, "none unless Info.plist has one")
    }

    func testImageScalesIdiomsAndTallVariants() throws {
        let b = try bundle(["icon.png": "", "icon@2x.png": "", "icon@3x.png": "", "icon~ipad.png": "",
                            "icon@2x~ipad.png": "", "splash-568h@2x.png": "", "splash@2x.png": "", "splash.png": "",
                            "only@3x.png": "", "photo.jpg": "", "photo@2x.jpg": ""])
        func image(_ name: String, _ scale: Int, _ idiom: Device.Idiom = .phone, tall: Bool = false) -> String? {
            b.resolve(ResourceQuery(name: name, scale: scale, tall: tall, idiom: .idiom(idiom)))
        }
        XCTAssertEqual(image("icon", 1), "icon.png")
        XCTAssertEqual(image("icon", 2), "icon@2x.png")
        XCTAssertEqual(image("icon", 3), "icon@3x.png")
        XCTAssertEqual(image("icon", 1, .pad), "icon~ipad.png")
        XCTAssertEqual(image("icon", 3, .pad), "icon@3x.png", "the scale comes before the idiom")
        XCTAssertEqual(image("icon", 2, .pad), "icon@2x~ipad.png")
        XCTAssertEqual(image("splash", 2, tall: true), "splash-568h@2x.png")
        XCTAssertEqual(image("splash", 2), "splash@2x.png")
        XCTAssertEqual(image("splash", 3, tall: true), "splash-568h@2x.png", "down from the device's scale first")
        XCTAssertEqual(image("only", 1), "only@3x.png", "then up")
        XCTAssertEqual(image("photo.jpg", 2), "photo@2x.jpg")
        XCTAssertEqual(image("icon@2x.png", 3), "icon@2x.png", "a variant's name is looked up as given")
        XCTAssertEqual(image("icon~ipad", 3), "icon~ipad.png")
        XCTAssertNil(image("icon@3x~ipad", 3))
        XCTAssertEqual(ImageName("a.png").candidates(for: Device(scale: 2, idiom: .pad, tall: true)),
                       ["a-568h@2x~ipad.png", "a-568h@2x.png", "a@2x~ipad.png", "a@2x.png",
                        "a-568h~ipad.png", "a-568h.png", "a~ipad.png", "a.png",
                        "a-568h@3x~ipad.png", "a-568h@3x.png", "a@3x~ipad.png", "a@3x.png"])
    }

    func testTheFirstLocationWithAnyVariantWins() throws {
        let b = try bundle(["Images/icon.png": "", "en.lproj/Images/icon@3x.png": "", "fr.lproj/Images/logo@3x.png": "",
                            "de.lproj/Images/logo.png": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Images/icon", languages: ["en"], scale: 3, idiom: .phone)), "Images/icon.png")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Images/logo", languages: ["de", "fr"], scale: 3, idiom: .phone)),
                       "de.lproj/Images/logo.png")
        let tried = b.candidates(for: ResourceQuery(name: "Images/icon", languages: ["en"], scale: 3, idiom: .phone))
        XCTAssertEqual(tried.first, ResourceBundle.Candidate(path: "Images/icon@3x~iphone.png", exists: false))
        XCTAssertEqual(tried.filter(\.exists).map(\.path), ["Images/icon.png", "en.lproj/Images/icon@3x.png"])
    }

    func testResourceBundlesInByteOrderAfterTheMainOne() throws {
        let b = try bundle(["b.bundle/x.png": "b", "B.bundle/x.png": "B", "a.bundle/y.png": "", "c.bundle/Contents/Resources/z.png": "",
                            "not-a-bundle/x.png": "", "file.bundle": "", "y.png": ""])
        XCTAssertEqual(b.nestedBundles.map(\.path), ["B.bundle", "a.bundle", "b.bundle", "c.bundle"])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "x.png"), nested: true), "B.bundle/x.png")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "y.png"), nested: true), "y.png", "the bundle itself first")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "z.png"), nested: true), "c.bundle/Contents/Resources/z.png")
        XCTAssertNil(b.resolve(ResourceQuery(name: "x.png"), nested: false))
    }

    func testAPathThatClimbsOutOfTheTreeFindsNothing() throws {
        let root = try tree(["inside.txt": ""])
        let outside = (root as NSString).deletingLastPathComponent
        let tree = try DirectoryTree(path: root)
        XCTAssertEqual(tree.kind(of: "inside.txt"), .file)
        XCTAssertNil(tree.kind(of: "../" + (outside as NSString).lastPathComponent))
        XCTAssertNil(tree.kind(of: "/etc/passwd"))
        XCTAssertEqual(tree.names(in: ".."), [])
        XCTAssertNil(tree.contents(of: "../../etc/passwd", limit: 10))
    }

    func testEveryEntryIsAResourceButAppleDoubleFiles() throws {
        let b = try bundle(["Main.storyboardc/": "", "MainMenu.nib/keyedobjects.nib": "", "iRate.bundle/x": "",
                            "link.txt": "->real.txt", "real.txt": "", "dangling.txt": "->nowhere", "._real.txt": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Main", type: "storyboardc")), "Main.storyboardc")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "MainMenu", type: "nib")), "MainMenu.nib")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "iRate.bundle")), "iRate.bundle")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "link.txt")), "link.txt")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "dangling.txt")), "dangling.txt",
                       "CoreFoundation files a name by its listing, whatever it points to")
        XCTAssertNil(b.resolve(ResourceQuery(name: "._real.txt")), "_CFIterateDirectory skips ._ files")
    }

    func testATypeWithItsDotIsTheSameType() throws {
        let b = try bundle(["Localizable.strings": "", "archive.tar.gz": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Localizable", type: ".strings")), "Localizable.strings")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Localizable", type: "strings")), "Localizable.strings")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "archive", type: "tar.gz")), "archive.tar.gz")
    }

    func testADeviceVariantReplacesTheGenericNameInItsOwnDirectoryOnly() throws {
        let b = try bundle(["data.json": "", "data~ipad.json": "", "en.lproj/text~ipad.txt": "", "text.txt": "",
                            "en.lproj/menu.plist": "", "en.lproj/menu~iphone.plist": "", "odd~ipad-x.txt": ""])
        XCTAssertEqual(b.resolve(ResourceQuery(name: "data.json", idiom: .pad)), "data~ipad.json")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "data.json", idiom: .phone)), "data.json")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "data.json")), "data.json", "no idiom: not an iOS device")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "text.txt", languages: ["en"], idiom: .pad)), "text.txt",
                       "the global text.txt is found first; the variant only replaces en.lproj's own text.txt")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "menu.plist", languages: ["en"], idiom: .phone)), "en.lproj/menu~iphone.plist")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "data~ipad.json", idiom: .phone)), "data~ipad.json", "found by its own name")
        XCTAssertNil(b.resolve(ResourceQuery(name: "odd-x.txt", idiom: .pad)), "a - after the ~ ends the product")
    }

    func testEveryResourceOfATypeInSearchOrder() throws {
        let root = try tree(["b.strings": "", "a.strings": "", "x.png": "", "fr.lproj/F.strings": "", "Base.lproj/B.strings": "",
                             "en.lproj/E.strings": "", "de.lproj/D.strings": "",
                             "Info.plist": plist(["CFBundleDevelopmentRegion": "en"])])
        let b = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(b.resources(ofType: "strings", preferred: ["fr"]),
                       ["a.strings", "b.strings", "fr.lproj/F.strings", "Base.lproj/B.strings"],
                       "the other languages' only when the first one and Base have none of that type")
        XCTAssertEqual(b.resources(ofType: ".strings", preferred: ["ja"]), ["a.strings", "b.strings", "en.lproj/E.strings",
                                                                          "Base.lproj/B.strings"])
        try FileManager.default.removeItem(atPath: root + "/Base.lproj/B.strings")
        let c = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(c.resources(ofType: "strings", preferred: ["de"]), ["a.strings", "b.strings", "de.lproj/D.strings"])
        XCTAssertEqual(c.resources(ofType: "strings", preferred: ["it"]), ["a.strings", "b.strings", "en.lproj/E.strings"])
    }

    func testANameThatClimbsOutFindsNothing() throws {
        let b = try bundle(["a.txt": "", "Sub/b.txt": ""])
        XCTAssertNil(b.resolve(ResourceQuery(name: "../a.txt", subdirectory: "Sub")))
        XCTAssertNil(b.resolve(ResourceQuery(name: "a.txt", subdirectory: "Sub/../..")))
        XCTAssertEqual(b.resolve(ResourceQuery(name: "b.txt", subdirectory: "Sub")), "Sub/b.txt")
    }

    func testTheAssetCatalogComesBeforeLooseImages() throws {
        let root = try tree(["icon@2x.png": "", "icon@3x.png": "", "Images/logo.png": ""])
        try write(CatalogWriter().add(name: "icon", scale: 2, idiom: 1).add(name: "Images/logo", scale: 0, idiom: 0).bytes(),
                  to: root + "/Assets.car")
        let b = ResourceBundle(tree: try DirectoryTree(path: root))
        let phone = ResourceQuery(name: "icon", scale: 2, idiom: .phone)
        XCTAssertEqual(b.resolve(phone), "Assets.car")
        XCTAssertEqual(b.catalogRendition(for: phone), AssetCatalog.Rendition(scale: 2, idiom: 1))
        XCTAssertEqual(b.candidates(for: phone).first, ResourceBundle.Candidate(path: "Assets.car", exists: true))
        XCTAssertEqual(b.resolve(ResourceQuery(name: "icon", scale: 2, idiom: .pad)), "icon@2x.png",
                       "the catalog has no pad or universal 2x icon: loose files")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "icon@3x", scale: 3)), "icon@3x.png",
                       "a variant's name is not looked for in the catalog")
        XCTAssertEqual(b.resolve(ResourceQuery(name: "Images/logo", scale: 3, idiom: .pad)), "Assets.car")
        XCTAssertNil(b.resolve(ResourceQuery(name: "icon", type: "png")),
                       "a plain resource query never answers the catalog (and here finds no icon.png)")
    }

    func testAnUnreadableCatalogLeavesLooseImagesAndSaysSo() throws {
        let root = try tree(["icon@2x.png": ""])
        try write(Array("BOMStore".utf8) + [0, 0, 0, 1], to: root + "/Assets.car")
        let b = ResourceBundle(tree: try DirectoryTree(path: root))
        guard case .failure(let error)? = b.catalog else { return XCTFail("the catalog read as \(String(describing: b.catalog))") }
        XCTAssertTrue(error.description.hasPrefix("unreadable asset catalog"), error.description)
        let query = ResourceQuery(name: "icon", scale: 2)
        XCTAssertEqual(b.resolve(query), "icon@2x.png")
        XCTAssertEqual(b.candidates(for: query).first, ResourceBundle.Candidate(path: "Assets.car", exists: false))
    }
}
