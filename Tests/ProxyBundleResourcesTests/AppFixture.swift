import Foundation

/// An iOS app laid out as real ones carry their libraries: a resource bundle, a bundle two
/// levels down (`GooglePlus.bundle/GPPShareboxSharedResources.bundle`), a framework and an app
/// extension, each with its own localizations and a `~ipad` twin.
enum AppFixture {
    static let level1 = "GooglePlus.bundle"
    static let level2 = "GooglePlus.bundle/GPPShareboxSharedResources.bundle"
    static let framework = "Frameworks/Kit.framework"
    static let appex = "PlugIns/Share.appex"
    /// Every bundle inside the app, in the order the tests go through them.
    static let nested = [level1, level2, framework, appex]

    /// The app's own files and its bundles': the main bundle (made for phones and pads,
    /// localized in en, fr, de), each nested bundle localized in en and fr (the extension in en
    /// and it), each with `layout.json` and its `layout~ipad.json`.
    static func main(appInfo: String = app()) -> [String: String] {
        var files = ["Info.plist": appInfo, "en.lproj/InfoPlist.strings": "", "fr.lproj/InfoPlist.strings": "",
                     "de.lproj/InfoPlist.strings": "", "layout.json": "", "layout~ipad.json": ""]
        for place in [level1, level2] {
            for file in ["en.lproj/Base.strings", "fr.lproj/Base.strings", "layout.json", "layout~ipad.json"] {
                files[place + "/" + file] = ""
            }
        }
        files[framework + "/Info.plist"] = info(["CFBundleDevelopmentRegion": "<string>en</string>",
                                                 "CFBundlePackageType": "<string>FMWK</string>"])
        files[appex + "/Info.plist"] = info(["CFBundleDevelopmentRegion": "<string>en</string>",
                                             "UIDeviceFamily": "<array><integer>1</integer><integer>2</integer></array>",
                                             "NSExtension": "<dict><key>NSExtensionPointIdentifier</key>"
                                                 + "<string>com.apple.share-services</string></dict>"])
        for file in ["en.lproj/Base.strings", "fr.lproj/Base.strings", "layout.json", "layout~ipad.json"] {
            files[framework + "/" + file] = ""
        }
        for file in ["en.lproj/Base.strings", "it.lproj/Base.strings", "layout.json", "layout~ipad.json"] {
            files[appex + "/" + file] = ""
        }
        return files
    }

    /// The app's Info.plist: development region en, phones and pads, and `more` keys.
    static func app(_ more: [String: String] = [:]) -> String {
        info(["CFBundleDevelopmentRegion": "<string>en</string>", "LSRequiresIPhoneOS": "<true/>",
              "UIDeviceFamily": "<array><integer>1</integer><integer>2</integer></array>"].merging(more) { $1 })
    }

    /// An XML property list of these keys, each with its value's XML.
    static func info(_ values: [String: String]) -> String {
        let entries = values.sorted { $0.key < $1.key }.map { "\t<key>\($0.key)</key>\($0.value)" }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            \(entries.joined(separator: "\n"))
            </dict></plist>
            """
    }

    /// `files` (relative to a bundle) put in the bundle at `place`.
    static func placed(_ files: [String: String], at place: String) -> [String: String] {
        Dictionary(uniqueKeysWithValues: files.map { (place.isEmpty ? $0.key : place + "/" + $0.key, $0.value) })
    }
}
