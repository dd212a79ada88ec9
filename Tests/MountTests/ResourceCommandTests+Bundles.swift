import Foundation
import XCTest

/// `check` in the bundles inside an app, and the device of `resolve` and `check` taken from the
/// app's Info.plist (issue 46).
extension ResourceCommandTests {
    /// An Info.plist of these keys, each with its value's XML.
    func info(_ keys: [String: String]) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<plist version=\"1.0\"><dict>\n"
            + keys.sorted { $0.key < $1.key }.map { "<key>\($0.key)</key>\($0.value)\n" }.joined() + "</dict></plist>\n"
    }

    /// The two cases: a global file a patch adds in a resource bundle, over its localized
    /// copies; a compiled storyboard patched two bundles down, which iPads pass over for the
    /// main bundle's `~ipad` twin. Each finding names its bundle, in text and JSON.
    func testCheckNamesTheBundleInsideTheApp() throws {
        let deep = "GooglePlus.bundle/GPPShareboxSharedResources.bundle"
        for file in ["ShareKit.bundle/en.lproj/Localizable.strings", "ShareKit.bundle/fr.lproj/Localizable.strings",
                     deep + "/GPPNativeShareBuilderImpl.storyboardc/Info.plist",
                     deep + "/GPPNativeShareBuilderImpl~ipad.storyboardc/Info.plist"] {
            try Disk.write(fx.inMain(file), "")
        }
        let hotfix = fx.root + "/hotfix"
        try Disk.write(hotfix + "/ShareKit.bundle/Localizable.strings", "")
        try Disk.write(hotfix + "/" + deep + "/GPPNativeShareBuilderImpl.storyboardc/Info.plist", "patched")
        try fx.start(patches: [hotfix])
        let found = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(found.status, 1, found.error)
        XCTAssertEqual(found.output, """
            Images/icon@2x.png (substitution): on scale 3 devices, Images/icon@3x.png from main loads instead
            \(deep)/GPPNativeShareBuilderImpl.storyboardc (patch \(hotfix), bundle \(deep)): on scale 2 pad, scale 3 pad \
            devices, \(deep)/GPPNativeShareBuilderImpl~ipad.storyboardc from main loads instead
            ShareKit.bundle/Localizable.strings (patch \(hotfix), bundle ShareKit.bundle): a global file over localized \
            copies below; en, fr now load it instead of en.lproj/Localizable.strings, fr.lproj/Localizable.strings

            """)
        let json = try proxybundle(["check", fx.mountpoint, "--json"])
        XCTAssertTrue(json.output.hasPrefix("[{\"kind\":\"image\",\"path\":\"Images/icon@2x.png\","), json.output)
        XCTAssertTrue(json.output.contains("\"detail\":null,\"bundle\":null,\"text\":\"Images/icon@2x.png (substitution)"), json.output)
        XCTAssertTrue(json.output.contains("\"detail\":\"en.lproj/Localizable.strings, fr.lproj/Localizable.strings\","
                                           + "\"bundle\":\"ShareKit.bundle\",\"text\":"), json.output)
        XCTAssertTrue(json.output.contains("\"bundle\":\"\(deep)\""), json.output)
    }

    /// `resolve` takes the device the app is made for: an iPhone app's `~iphone` variant; an
    /// app for both says on stderr that it assumes a phone; a Mac's bundle none.
    func testResolveTakesTheDeviceTheAppIsMadeFor() throws {
        let clips = ["DETweetPaperClip.png", "DETweetPaperClip~iphone.png", "DETweetPaperClip~ipad.png"]
        func app(_ name: String, _ keys: [String: String], resources: String = "") throws -> String {
            let root = fx.root + "/" + name
            for clip in clips { try Disk.write(root + "/" + resources + clip, "") }
            try Disk.write(root + "/" + (resources.isEmpty ? "" : "Contents/") + "Info.plist", info(keys))
            return root
        }
        let phone = try app("Phone.app", ["LSRequiresIPhoneOS": "<true/>"])
        let resolved = try proxybundle(["resolve", phone, "DETweetPaperClip", "--type", "png"])
        XCTAssertEqual(resolved.status, 0, resolved.error)
        XCTAssertEqual(resolved.output, "DETweetPaperClip~iphone.png\n", "the issue's case")
        XCTAssertEqual(resolved.error, "")
        XCTAssertEqual(try proxybundle(["resolve", phone, "DETweetPaperClip.png", "--idiom", "none"]).output, "DETweetPaperClip.png\n")
        let pad = try app("Pad.app", ["UIDeviceFamily": "<array><integer>2</integer></array>"])
        XCTAssertEqual(try proxybundle(["resolve", pad, "DETweetPaperClip.png"]).output, "DETweetPaperClip~ipad.png\n")

        let both = try app("Both.app", ["UIDeviceFamily": "<array><integer>1</integer><integer>2</integer></array>"])
        let assumed = try proxybundle(["resolve", both, "DETweetPaperClip.png"])
        XCTAssertEqual(assumed.status, 0, assumed.error)
        XCTAssertEqual(assumed.output, "DETweetPaperClip~iphone.png\n")
        XCTAssertEqual(assumed.error, "proxybundle: note: \(both) is made for phone and pad; "
                       + "assuming phone (--idiom pad or --idiom none to choose)\n")
        let chosen = try proxybundle(["resolve", both, "DETweetPaperClip.png", "--idiom", "pad"])
        XCTAssertEqual(chosen.output, "DETweetPaperClip~ipad.png\n")
        XCTAssertEqual(chosen.error, "", "a chosen idiom needs no note")

        let mac = try app("Mac.app", ["CFBundleDevelopmentRegion": "<string>en</string>"], resources: "Contents/Resources/")
        XCTAssertEqual(try proxybundle(["resolve", mac, "DETweetPaperClip.png"]).output, "Contents/Resources/DETweetPaperClip.png\n")
    }

    /// `check` on an iPhone app checks phones only; `--tall` (or `tall-phone` in `--idioms`)
    /// adds the 4-inch phone, which passes over a patched `bg@2x.png` for `bg-568h@2x.png`.
    func testCheckTakesTheAppsDevicesAndTheTallPhoneOnRequest() throws {
        try Disk.write(fx.inMain("Info.plist"), info(["LSRequiresIPhoneOS": "<true/>", "CFBundleDevelopmentRegion": "<string>en</string>"]))
        for file in ["Images/bg@2x.png", "Images/bg-568h@2x.png", "layout.json", "layout~ipad.json"] { try Disk.write(fx.inMain(file), "") }
        for file in ["Images/bg@2x.png", "layout.json"] { try Disk.write(fx.inSubstitution(file), "patched") }
        try fx.start()
        let trap = "Images/icon@2x.png (substitution): on scale 3 devices, Images/icon@3x.png from main loads instead\n"
        let phones = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(phones.output, trap, "an iPhone app: no pad passes layout.json over, and no 4-inch phone is checked")
        let tallLine = "Images/bg@2x.png (substitution): on scale 2 tall-phone devices, Images/bg-568h@2x.png from main loads instead\n"
        let tall = try proxybundle(["check", fx.mountpoint, "--tall"])
        XCTAssertEqual(tall.status, 1, tall.error)
        XCTAssertEqual(tall.output, tallLine + trap)
        let listed = try proxybundle(["check", fx.mountpoint, "--idioms", "phone,tall-phone,pad"])
        XCTAssertEqual(listed.output, tallLine + trap
                       + "layout.json (substitution): on scale 2 pad, scale 3 pad devices, layout~ipad.json from main loads instead\n")
        for (bad, expected) in [(["--scales", "3", "--tall"], "tall-phone is a scale 2 device"),
                                (["--idioms", "phone,tv"], "--idioms takes phone, pad, tall-phone or none")] {
            let refused = try proxybundle(["check", fx.mountpoint] + bad)
            XCTAssertEqual(refused.status, 64, "\(bad)")
            XCTAssertEqual(refused.error.filter { $0 == "\n" }.count, 1, refused.error)
            XCTAssertTrue(refused.error.contains(expected), refused.error)
        }
    }
}
