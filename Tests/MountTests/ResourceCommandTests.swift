import CatalogWriter
import Foundation
import ProxyBundleCore
import ProxyBundleResources
import XCTest

/// `proxybundle resolve` and `proxybundle check` on a mount of the example bundle and its patch,
/// on a plain directory, and with bad arguments.
final class ResourceCommandTests: XCTestCase {
    var fx: MountFixture!

    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Examples").path

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        for (from, to) in [("Demo.app", fx.main), ("patch", fx.substitution)] {
            let copy = try Spawn.run("/bin/cp", ["-a", Self.examples + "/" + from + "/.", to])
            XCTAssertEqual(copy.status, 0, copy.error)
        }
    }

    override func tearDown() {
        fx?.tearDown()
    }

    func testResolveOnAMountNamesTheServingLayer() throws {
        try fx.start()
        let three = try proxybundle(["resolve", fx.mountpoint, "Images/icon", "--image", "--scale", "3"])
        XCTAssertEqual(three.status, 0, three.error)
        XCTAssertEqual(three.output, "Images/icon@3x.png\tmain \(fx.main)/Images/icon@3x.png\n")
        let two = try proxybundle(["resolve", fx.mountpoint, "icon", "--type", "png", "--in-directory", "Images",
                                   "--image", "--scale", "2", "--idiom", "pad"])
        XCTAssertEqual(two.output, "Images/icon@2x.png\tsubstitution \(fx.substitution)/Images/icon@2x.png\n")
        let german = try proxybundle(["resolve", fx.mountpoint, "Localizable.strings", "--languages", "de-AT,fr"])
        XCTAssertEqual(german.output, "de.lproj/Localizable.strings\tsubstitution \(fx.substitution)/de.lproj/Localizable.strings\n")
        let font = try proxybundle(["resolve", fx.mountpoint, "Bold.ttf", "--all-bundles"])
        XCTAssertEqual(font.status, 1, "the patch's opaque Fonts.bundle hides the main bundle's Bold.ttf")
        XCTAssertEqual(font.output, "")
        XCTAssertEqual(font.error, "proxybundle: Bold.ttf: no resource of that name in \(fx.mountpoint)\n")
        let regular = try proxybundle(["resolve", fx.mountpoint, "Regular", "--type", "ttf", "--all-bundles", "--json"])
        XCTAssertTrue(regular.output.hasPrefix("""
            {"path":"Fonts.bundle/Regular.ttf","role":"substitution","backing_path":"\(fx.substitution)/Fonts.bundle/Regular.ttf",\
            "bundle":"Fonts.bundle","search_list":{
            """), regular.output)
    }

    /// `--tall` (a 4-inch phone) puts -568h variants first, from whichever layer has them.
    func testResolveTallPrefersThe568hVariant() throws {
        for name in ["splash.png", "splash@2x.png", "splash-568h.png"] { try Disk.write(fx.inMain("Images/" + name), name) }
        try Disk.write(fx.inSubstitution("Images/splash-568h@2x.png"), "tall")
        try fx.start()
        let plain = try proxybundle(["resolve", fx.mountpoint, "Images/splash", "--image", "--scale", "2"])
        XCTAssertEqual(plain.output, "Images/splash@2x.png\tmain \(fx.main)/Images/splash@2x.png\n", plain.error)
        let tall = try proxybundle(["resolve", fx.mountpoint, "Images/splash", "--image", "--scale", "2", "--tall"])
        XCTAssertEqual(tall.status, 0, tall.error)
        XCTAssertEqual(tall.output, "Images/splash-568h@2x.png\tsubstitution \(fx.substitution)/Images/splash-568h@2x.png\n")
        let one = try proxybundle(["resolve", fx.mountpoint, "Images/splash", "--image", "--scale", "1", "--tall"])
        XCTAssertEqual(one.output, "Images/splash-568h.png\tmain \(fx.main)/Images/splash-568h.png\n", one.error)
        let refused = try proxybundle(["resolve", fx.mountpoint, "Images/splash", "--tall"])
        XCTAssertEqual(refused.status, 64)
        XCTAssertEqual(refused.error, "proxybundle: --scale and --tall need --image (see proxybundle --help)\n")
        // no iPad is a 4-inch phone: -568h variants are never an iPad's
        let pad = try proxybundle(["resolve", fx.mountpoint, "Images/splash", "--image", "--scale", "2", "--tall", "--idiom", "pad"])
        XCTAssertEqual(pad.status, 64, pad.output)
        XCTAssertEqual(pad.error, "proxybundle: --tall is a 4-inch phone: it goes with --idiom phone, not pad (see proxybundle --help)\n")
    }

    /// The first case: the first matched localization's copy whited out by a patch, so
    /// Base.lproj (searched right after it) wins over fr.lproj; the JSON says why.
    func testBaseComesRightAfterTheFirstMatchAndAWhiteoutIsNamed() throws {
        let patch = fx.root + "/hotfix"
        for language in ["Base", "fr", "fr_CA"] { try Disk.write(fx.inMain(language + ".lproj/Main.nib/objects.nib"), language) }
        try Disk.whiteout(patch + "/fr_CA.lproj", "Main.nib")
        try fx.start(patches: [patch])
        let nib = try proxybundle(["resolve", fx.mountpoint, "Main", "--type", ".nib", "--languages", "fr-CA", "--json",
                                   "--candidates"])
        XCTAssertEqual(nib.status, 0, nib.error)
        XCTAssertTrue(nib.output.hasPrefix("{\"path\":\"Base.lproj/Main.nib\",\"role\":\"main\""), nib.output)
        XCTAssertTrue(nib.output.contains("\"languages\":[\"fr_CA\",\"fr\",\"en\"]"), nib.output)
        XCTAssertTrue(nib.output.contains("""
            {"path":"fr_CA.lproj/Main.nib","exists":false,"status":"whiteout","role":"patch",\
            "backing_path":"\(patch)/fr_CA.lproj/.wh.Main.nib"}
            """), nib.output)
        XCTAssertTrue(nib.output.contains("""
            {"path":"fr.lproj/Main.nib","exists":true,"status":"shadowed","by":"Base.lproj/Main.nib"}
            """), nib.output)
    }

    /// A bundle inside the app follows the app's language choice; --idiom works on any resource;
    /// --type alone lists every resource of the type in search order.
    func testNestedBundlesIdiomsAndTypeListings() throws {
        try Disk.write(fx.inMain("Kit.bundle/it.lproj/Kit.strings"), "it")
        try Disk.write(fx.inMain("Kit.bundle/fr.lproj/Kit.strings"), "fr")
        try Disk.write(fx.inMain("Kit.bundle/en.lproj/Kit.strings"), "en")
        try Disk.write(fx.inMain("layout~ipad.json"), "{}")
        try fx.start()
        let kit = try proxybundle(["resolve", fx.mountpoint + "/Kit.bundle", "Kit.strings", "--languages", "it,fr", "--candidates"])
        XCTAssertEqual(kit.status, 0, kit.error)
        XCTAssertEqual(kit.output, """
            # languages fr, en (follows the main bundle's choice; no development region)
              Kit.strings
            * fr.lproj/Kit.strings
              Base.lproj/Kit.strings
            * en.lproj/Kit.strings
            fr.lproj/Kit.strings\tmain \(fx.main)/Kit.bundle/fr.lproj/Kit.strings

            """, "the app has fr, not it: the nested bundle follows it although it has it")
        let pad = try proxybundle(["resolve", fx.mountpoint, "config.json", "--idiom", "pad"])
        XCTAssertEqual(pad.output, "config.json\tsubstitution \(fx.substitution)/config.json\n")
        let layout = try proxybundle(["resolve", fx.mountpoint, "layout", "--type", "json", "--idiom", "pad"])
        XCTAssertEqual(layout.output, "layout~ipad.json\tmain \(fx.main)/layout~ipad.json\n")
        XCTAssertEqual(try proxybundle(["resolve", fx.mountpoint, "layout.json", "--idiom", "phone"]).status, 1)
        let strings = try proxybundle(["resolve", fx.mountpoint, "--type", "strings", "--languages", "de"])
        XCTAssertEqual(strings.output, """
            de.lproj/InfoPlist.strings
            de.lproj/Localizable.strings

            """, "the first language's, and none of the others' once it has some")
    }

    /// UIImage(named:) asks the asset catalog first: resolve answers it with the rendition, and
    /// check names the patch's loose copy of an image the catalog serves.
    func testTheAssetCatalogAnswersBeforeLooseImages() throws {
        try Data(CatalogWriter().add(name: "Images/icon", scale: 3, idiom: 0).bytes())
            .write(to: URL(fileURLWithPath: fx.inMain("Assets.car")))
        try fx.start()
        let three = try proxybundle(["resolve", fx.mountpoint, "Images/icon", "--image", "--scale", "3"])
        XCTAssertEqual(three.output, "Assets.car\trendition scale 3, universal, appearance 0\tmain \(fx.main)/Assets.car\n")
        let two = try proxybundle(["resolve", fx.mountpoint, "Images/icon", "--image", "--scale", "2", "--json"])
        XCTAssertTrue(two.output.hasPrefix("{\"path\":\"Images/icon@2x.png\",\"role\":\"substitution\""), two.output)
        let found = try proxybundle(["check", fx.mountpoint, "--scales", "3"])
        XCTAssertEqual(found.output, """
            Images/icon@2x.png (substitution): never loads on every device, Assets.car from main has it \
            (Images/icon; scale 3 phone: scale 3, universal, appearance 0; scale 3 pad: scale 3, universal, appearance 0)

            """)
        try Disk.write(fx.substitution + "/Assets.car", "not a catalog")  // an updater's change, then told
        XCTAssertEqual(try proxybundle(["invalidate", fx.mountpoint]).status, 0)
        let unreadable = try proxybundle(["resolve", fx.mountpoint, "Images/icon", "--image", "--scale", "3"])
        XCTAssertEqual(unreadable.output, "Images/icon@3x.png\tmain \(fx.main)/Images/icon@3x.png\n")
        XCTAssertTrue(unreadable.error.hasPrefix("proxybundle: Assets.car: unreadable asset catalog"), unreadable.error)
    }

    func testResolveOnAPlainDirectoryAndItsCandidates() throws {
        let plain = try proxybundle(["resolve", fx.main, "Images/icon.png", "--image", "--scale", "2"])
        XCTAssertEqual(plain.status, 0, plain.error)
        XCTAssertEqual(plain.output, "Images/icon@2x.png\n", "no layer to name outside a mount")
        let tried = try proxybundle(["resolve", fx.main, "Localizable.strings", "--languages", "fr", "--candidates"])
        XCTAssertEqual(tried.output, """
            # languages fr, en (matched the preferred languages; development region en)
              Localizable.strings
            * fr.lproj/Localizable.strings
              Base.lproj/Localizable.strings
            * en.lproj/Localizable.strings
            fr.lproj/Localizable.strings

            """)
        let json = try proxybundle(["resolve", fx.main, "config", "--type", "json", "--candidates", "--json"])
        XCTAssertEqual(json.output, """
            {"path":"config.json","search_list":{"languages":["en"],"localizations":["en","fr","Base"],\
            "development_region":"en","preferred":["en"],"matched_against":"user"},\
            "candidates":[{"path":"config.json","exists":true,"status":"loaded"},\
            {"path":"en.lproj/config.json","exists":false,"status":"absent"},\
            {"path":"Base.lproj/config.json","exists":false,"status":"absent"}]}

            """)
    }

    func testResolveRefusesBadArgumentsWithOneLine() throws {
        let cases: [([String], String)] = [
            (["resolve", fx.main, "icon", "--image", "--scale", "4"], "--scale must be 1, 2 or 3"),
            (["resolve", fx.main, "icon", "--image", "--idiom", "tv"], "--idiom must be phone, pad or none"),
            (["resolve", fx.main, "icon", "--scale", "2"], "need --image"),
            (["resolve", fx.main, "../etc/passwd"], "may not contain .."),
            (["resolve", fx.main, "/etc/passwd"], "must be relative"),
            (["resolve", fx.main, "x", "--in-directory", "a/../.."], "may not contain .."),
            (["resolve", fx.main + "/missing", "icon"], "No such file or directory"),
            (["resolve", fx.main + "/config.json", "icon"], "Not a directory"),
            (["resolve", fx.main], "give a NAME, or --type"),
            (["resolve", fx.main, "x", "--languages", "../../x"], "'../../x' is not a language"),
            (["resolve", fx.main, "x", "--languages", "en,/etc"], "'/etc' is not a language"),
            (["resolve", fx.main, "x", "--languages", "en US"], "'en US' is not a language"),
            (["resolve", fx.main, "--image", "--type", "png"], "--image needs a NAME"),
        ]
        for (arguments, expected) in cases {
            let result = try proxybundle(arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            if !expected.contains("No such") && !expected.contains("Not a directory") {
                XCTAssertEqual(result.status, 64, "a usage error: \(arguments)")
            }
            XCTAssertEqual(result.error.filter { $0 == "\n" }.count, 1, "\(arguments): \(result.error)")
            XCTAssertTrue(result.error.localizedCaseInsensitiveContains(expected), "\(arguments): \(result.error)")
        }
    }

    /// The example patch's trap: icon@2x.png replaced, icon.png and icon@3x.png not.
    func testCheckFindsTheExamplesIconTrapAndNothingOnceFixed() throws {
        try fx.start()
        let found = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(found.status, 1, found.error)
        XCTAssertEqual(found.output, """
            Images/icon@2x.png (substitution): on scale 3 devices, Images/icon@3x.png from main loads instead

            """, "scale 2 and 3 by default")
        let every = try proxybundle(["check", fx.mountpoint, "--scales", "1,2,3", "--idioms", "pad,phone"])
        XCTAssertEqual(every.output, """
            Images/icon@2x.png (substitution): on scale 1 devices, Images/icon.png from main loads instead
            Images/icon@2x.png (substitution): on scale 3 devices, Images/icon@3x.png from main loads instead

            """)
        XCTAssertEqual(try proxybundle(["check", fx.mountpoint, "--scales", "2", "--idioms", "pad"]).status, 0)
        for bad in [["--scales", "4"], ["--scales", "2,,3"], ["--idioms", "tv"]] {
            let refused = try proxybundle(["check", fx.mountpoint] + bad)
            XCTAssertEqual(refused.status, 64, "\(bad)")
            XCTAssertEqual(refused.error.filter { $0 == "\n" }.count, 1, refused.error)
        }
        // fixed through the mount: the other variants copied up as they are
        for variant in ["icon.png", "icon@3x.png"] {
            let copy = try Spawn.run("/bin/cp", [fx.inMain("Images/" + variant), fx.inMount("Images/" + variant)])
            XCTAssertEqual(copy.status, 0, copy.error)
        }
        let fixed = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(fixed.status, 0, fixed.output + fixed.error)
        XCTAssertEqual(fixed.output, "")
        XCTAssertEqual(try proxybundle(["check", fx.mountpoint, "--json"]).output, "[]\n")
    }

    func testCheckNamesEachPatchAndEveryKindOfFinding() throws {
        let hotfix = fx.root + "/hotfix"
        try Disk.write(hotfix + "/en.lproj/config.json", "{}")
        try Disk.write(hotfix + "/CONFIG.JSON", "{}")
        try Disk.write(hotfix + "/Images/.wh.never-there.png", "")
        try fx.start(patches: [hotfix])
        let found = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(found.status, 1, found.error)
        let lines = found.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, found.output)
        // the substitution's config.json (the example patch's) is the upper of the two names
        XCTAssertTrue(lines.contains("config.json (substitution): differs only in letter case from CONFIG.JSON from patch \(hotfix); both show, nothing is replaced"), found.output)
        XCTAssertTrue(lines.contains("Images/.wh.never-there.png (patch \(hotfix)): a whiteout that hides nothing below it"), found.output)
        XCTAssertTrue(lines.contains("en.lproj/config.json (patch \(hotfix)): never loads, the global config.json from substitution always comes first"), found.output)
        let json = try proxybundle(["check", fx.mountpoint, "--json"])
        XCTAssertEqual(json.status, 1)
        XCTAssertTrue(json.output.contains("{\"kind\":\"whiteout\",\"path\":\"Images/.wh.never-there.png\",\"role\":\"patch\",\"layer\":\"\(hotfix)\""), json.output)
    }

    func testCheckRefusesWhatIsNotAMount() throws {
        let result = try proxybundle(["check", fx.main])
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.error, "proxybundle: \(fx.main) is not a proxybundle mount\n")
    }

    /// Layers merged in-process (the library's `LayeredTree`) show what the mount of the same
    /// layers shows: every path's kind and every directory's names, with whiteouts, opaque
    /// directories, symlinks and a directory over a file.
    func testLayeredTreeShowsWhatTheMountShows() throws {
        let patch = fx.root + "/extra"
        try Disk.write(patch + "/Images/icon@3x.png", "extra")
        try Disk.symlink(patch + "/Images/link.png", to: "icon.png")
        try Disk.symlink(patch + "/Art", to: "Images")
        try Disk.write(patch + "/config.json/inside", "a directory over a file")
        try Disk.whiteout(patch + "/fr.lproj", "InfoPlist.strings")
        try Disk.opaque(patch + "/Base.lproj")
        try Disk.write(patch + "/Base.lproj/new.nib", "")
        try fx.start(patches: [patch])
        let mounted = try DirectoryTree(path: fx.mountpoint)
        let merged = try LayeredTree(paths: [fx.substitution, patch, fx.main])
        var pending = [""]
        var compared = 0
        while let directory = pending.popLast() {
            let names = mounted.names(in: directory).sorted()
            XCTAssertEqual(merged.names(in: directory).sorted(), names, "names in '\(directory)'")
            for name in names {
                let path = ResourcePath.join(directory, name)
                XCTAssertEqual(merged.kind(of: path), mounted.kind(of: path), path)
                XCTAssertEqual(merged.contents(of: path, limit: 1 << 16), mounted.contents(of: path, limit: 1 << 16), path)
                if mounted.kind(of: path) == .directory && name != "Art" { pending.append(path) }
                compared += 1
            }
        }
        XCTAssertGreaterThan(compared, 20)
        XCTAssertEqual(merged.kind(of: "Art/link.png"), .file)
    }
}

/// `resolve --casefold` and `check --casefold` (issue 38).
extension ResourceCommandTests {
    func testResolveCasefoldFindsAnySpellingOnAPlainDirectory() throws {
        let folded = try proxybundle(["resolve", fx.main, "IMAGES/Icon.PNG", "--casefold"])
        XCTAssertEqual(folded.status, 0, folded.error)
        XCTAssertEqual(folded.output, "Images/icon.png\n", "the real spelling")
        let exact = try proxybundle(["resolve", fx.main, "IMAGES/Icon.PNG"])
        XCTAssertEqual(exact.status, 1, "case matters without --casefold")
    }

    func testCheckCasefoldReportsSpellingsNotCaseDifferences() throws {
        try Disk.write(fx.substitution + "/PKGINFO", "APPL????")
        try Disk.write(fx.substitution + "/notes.txt", "a")
        try Disk.write(fx.substitution + "/Notes.txt", "b")
        try fx.start()
        let plain = try proxybundle(["check", fx.mountpoint, "--scales", "2", "--idioms", "pad"])
        XCTAssertEqual(plain.output, """
            PKGINFO (substitution): differs only in letter case from PkgInfo from main; both show, nothing is replaced

            """)
        let folded = try proxybundle(["check", fx.mountpoint, "--scales", "2", "--idioms", "pad", "--casefold"])
        XCTAssertEqual(folded.status, 1, folded.error)
        XCTAssertEqual(folded.output, """
            notes.txt (substitution): never shows under casefold, Notes.txt of the same layer has its name

            """)
    }
}

/// `resolve` and `check` follow a mount's `-o casefold`.
extension ResourceCommandTests {
    func testResolveAndCheckInsideACasefoldMountFoldNames() throws {
        try Disk.write(fx.substitution + "/PKGINFO", "APPL????")
        try fx.start(["-o", "casefold"])
        let resolved = try proxybundle(["resolve", fx.mountpoint, "IMAGES/Icon.PNG"])
        XCTAssertEqual(resolved.status, 0, resolved.error)
        XCTAssertEqual(resolved.output, "Images/icon.png\tmain \(fx.main)/Images/icon.png\n", "folded as the mount folds")
        let checked = try proxybundle(["check", fx.mountpoint, "--scales", "2", "--idioms", "pad"])
        XCTAssertEqual(checked.status, 0, checked.output + checked.error)
        XCTAssertEqual(checked.output, "", "a case-only difference replaces the name under casefold")
    }
}
