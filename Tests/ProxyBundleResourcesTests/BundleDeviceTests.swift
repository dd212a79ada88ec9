import Foundation
import ProxyBundleResources
import XCTest

/// The device a bundle is made for, taken unless told (issue 46), bundle layouts inside an app,
/// and the language choice of an extension.
final class BundleDeviceTests: BundleTestCase {
    static let clips = ["DETweetPaperClip.png": "", "DETweetPaperClip~iphone.png": "", "DETweetPaperClip~ipad.png": "",
                        "icon@2x.png": "", "icon@2x~ipad.png": ""]

    /// A bundle of `clips` whose Info.plist holds `keys` (the XML of each value).
    func bundle(_ keys: [String: String]) throws -> ResourceBundle {
        let files = Self.clips.merging(["Info.plist": AppFixture.info(keys), "Kit.bundle/x~iphone.json": "", "Kit.bundle/x.json": ""]) { $1 }
        return ResourceBundle(tree: try DirectoryTree(path: try tree(files)))
    }

    func clip(_ bundle: ResourceBundle, _ idiom: IdiomChoice = .bundle) -> String? {
        bundle.resolve(ResourceQuery(name: "DETweetPaperClip", type: "png", idiom: idiom))
    }

    func testTheIdiomComesFromTheAppsInfoPlist() throws {
        let iPhoneOS = try bundle(["LSRequiresIPhoneOS": "<true/>"])
        XCTAssertEqual(iPhoneOS.madeFor, [.phone])
        XCTAssertEqual(clip(iPhoneOS), "DETweetPaperClip~iphone.png", "the issue's case: every iPhone loads ~iphone")
        XCTAssertEqual(clip(iPhoneOS, .none), "DETweetPaperClip.png", "--idiom none: no device modifier")
        XCTAssertEqual(clip(iPhoneOS, .pad), "DETweetPaperClip~ipad.png", "an idiom given wins")
        XCTAssertEqual(iPhoneOS.bundle(at: "Kit.bundle").resolve(ResourceQuery(name: "x.json")), "Kit.bundle/x~iphone.json",
                       "a bundle inside the app runs on the app's device")

        let phone = try bundle(["UIDeviceFamily": "<array><integer>1</integer></array>"])
        XCTAssertEqual(clip(phone), "DETweetPaperClip~iphone.png")
        let pad = try bundle(["UIDeviceFamily": "<integer>2</integer>", "LSRequiresIPhoneOS": "<true/>"])
        XCTAssertEqual(pad.madeFor, [.pad], "one number, not an array; UIDeviceFamily says more than LSRequiresIPhoneOS")
        XCTAssertEqual(clip(pad), "DETweetPaperClip~ipad.png")
        XCTAssertEqual(pad.resolve(ResourceQuery(name: "icon", scale: 2)), "icon@2x~ipad.png", "images too")
        XCTAssertEqual(pad.resolve(ResourceQuery(name: "icon", scale: 2, idiom: .none)), "icon@2x.png")

        let both = try bundle(["UIDeviceFamily": "<array><string>1</string><integer>2</integer></array>"])
        XCTAssertEqual(both.madeFor, [.phone, .pad])
        XCTAssertTrue(both.assumesIdiom)
        XCTAssertEqual(clip(both), "DETweetPaperClip~iphone.png", "phone and pad: a phone is assumed")
        XCTAssertFalse(phone.assumesIdiom)

        let tv = try bundle(["UIDeviceFamily": "<array><integer>3</integer></array>"])
        XCTAssertEqual(tv.madeFor, [], "a TV app: neither phone nor pad")
        XCTAssertEqual(clip(tv), "DETweetPaperClip.png")
        let silent = try bundle(["CFBundleDevelopmentRegion": "<string>en</string>"])
        XCTAssertNil(silent.madeFor)
        XCTAssertEqual(clip(silent), "DETweetPaperClip.png", "nothing says: no device modifier")
    }

    func testAMacOSBundleHasNoIdiom() throws {
        let root = try tree(AppFixture.placed(Self.clips, at: "Contents/Resources").merging(
            ["Contents/Info.plist": AppFixture.info(["UIDeviceFamily": "<array><integer>2</integer><integer>6</integer></array>"])]) { $1 })
        let mac = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(mac.info.deviceFamilies, [2, 6])
        XCTAssertEqual(mac.madeFor, [], "Contents/: a Mac, whatever else Info.plist says")
        XCTAssertEqual(clip(mac), "Contents/Resources/DETweetPaperClip.png")
    }

    func testTheDevicesCheckedAreThoseTheAppIsMadeFor() throws {
        func devices(_ keys: [String: String], at place: String = "") throws -> [Device] {
            let main = try tree(["x": "", place.isEmpty ? "Info.plist" : place + "/Info.plist": AppFixture.info(keys),
                                 place.isEmpty ? "y" : place + "/Resources/y": ""], "main")
            return PatchCheck(tree: try LayeredTree(paths: [try tree(["y": ""], "patch"), main])).devices
        }
        XCTAssertEqual(try devices(["LSRequiresIPhoneOS": "<true/>"]), [Device(scale: 2, idiom: .phone), Device(scale: 3, idiom: .phone)])
        XCTAssertEqual(try devices(["UIDeviceFamily": "<array><integer>2</integer></array>"]),
                       [Device(scale: 2, idiom: .pad), Device(scale: 3, idiom: .pad)])
        XCTAssertEqual(try devices(["UIDeviceFamily": "<array><integer>1</integer><integer>2</integer></array>"]), Device.checked)
        XCTAssertEqual(try devices([:]), Device.checked, "nothing says: phones and pads")
        XCTAssertEqual(try devices([:], at: "Contents"), [Device(scale: 1, idiom: nil), Device(scale: 2, idiom: nil)])
        XCTAssertEqual(Device.checked(madeFor: [.phone], tall: true).last, Device(scale: 2, idiom: .phone, tall: true))
    }

    /// `check --tall`: a 4-inch phone passes over a patched `bg@2x.png` for the main bundle's
    /// `bg-568h@2x.png`; no other device does, and it is not checked by default.
    func testATallPhonePassesOverAPatchedImage() throws {
        let main = try tree(["bg@2x.png": "", "bg-568h@2x.png": "", "bg@3x.png": ""], "main")
        let patch = try tree(["bg@2x.png": "patched", "bg@3x.png": "patched"], "patch")
        let layers = try LayeredTree(paths: [patch, main])
        XCTAssertEqual(PatchCheck(tree: layers).findings(), [], "not in the default devices")
        let devices = Device.checked(madeFor: nil, tall: true)
        let found = PatchCheck(tree: layers, devices: devices).findings()
        XCTAssertEqual(found.map { $0.text(checked: devices) { ["patch", "main"][$0] } },
                       ["bg@2x.png, bg@3x.png (patch): on scale 2 tall-phone devices, bg-568h@2x.png from main loads instead"])
        XCTAssertEqual(found.first?.devices.map(\.description), ["scale 2 tall-phone"])
    }

    /// `_CFBundleGetBundleVersionForURL`: a framework's `Resources` comes before `Contents`,
    /// any other bundle's `Contents` before `Resources`; an iOS framework is flat.
    func testFrameworkLayouts() throws {
        let root = try tree(["Frameworks/Flat.framework/Info.plist": "", "Frameworks/Flat.framework/a.txt": "",
                             "Frameworks/Both.framework/Resources/a.txt": "", "Frameworks/Both.framework/Contents/Resources/a.txt": "",
                             "Both.bundle/Resources/a.txt": "", "Both.bundle/Contents/Resources/a.txt": ""])
        let app = ResourceBundle(tree: try DirectoryTree(path: root))
        XCTAssertEqual(app.bundle(at: "Frameworks/Flat.framework").resolve(ResourceQuery(name: "a.txt")), "Frameworks/Flat.framework/a.txt")
        XCTAssertEqual(app.bundle(at: "Frameworks/Both.framework").resources, "Frameworks/Both.framework/Resources")
        XCTAssertEqual(app.bundle(at: "Both.bundle").resources, "Both.bundle/Contents/Resources")
    }

    /// An extension runs in a process of its own: it chooses its languages itself, and so do the
    /// bundles it holds (an extension's Info.plist has `NSExtension`); a bundle of the app
    /// follows the app.
    func testAnExtensionChoosesItsOwnLanguages() throws {
        let appex = AppFixture.appex
        let root = try tree(AppFixture.main().merging([
            appex + "/it.lproj/L.strings": "", appex + "/en.lproj/L.strings": "",
            appex + "/Kit.bundle/it.lproj/L.strings": "", appex + "/Kit.bundle/en.lproj/L.strings": "",
            "Kit.bundle/it.lproj/L.strings": "", "Kit.bundle/en.lproj/L.strings": "",
        ]) { $1 })
        let app = ResourceBundle(tree: try DirectoryTree(path: root))
        let italian = ResourceQuery(name: "L.strings", languages: ["it"])
        XCTAssertNil(app.bundle(at: appex).main, "the extension is its process's main bundle")
        XCTAssertEqual(app.bundle(at: appex).resolve(italian), appex + "/it.lproj/L.strings")
        XCTAssertEqual(app.bundle(at: appex + "/Kit.bundle").main?.path, appex)
        XCTAssertEqual(app.bundle(at: appex + "/Kit.bundle").resolve(italian), appex + "/Kit.bundle/it.lproj/L.strings")
        XCTAssertEqual(app.bundle(at: "Kit.bundle").resolve(italian), "Kit.bundle/en.lproj/L.strings",
                       "the app has no Italian: its bundle follows its choice, English")
    }
}
