import Foundation
import XCTest

/// An Info.plist that cannot be read (issue 47): `resolve` and `check` say so once on stderr,
/// naming the file, and answer as CoreFoundation does for a bundle without one.
extension ResourceCommandTests {
    /// The lines of `text` (its last newline aside).
    func lines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    func testResolveSaysAnUnreadableInfoPlistOnceAndAnswersAsWithoutOne() throws {
        let app = fx.root + "/Phone.app"
        for clip in ["Clip.png", "Clip~iphone.png", "Clip~ipad.png", "Inner.bundle/Clip.png"] { try Disk.write(app + "/" + clip, "") }
        let query = ["resolve", app, "Clip", "--type", "png", "--all-bundles", "--candidates"]
        let without = try proxybundle(query)
        XCTAssertEqual(without.status, 0, without.error)
        XCTAssertEqual(without.error, "")
        let damaged: [(bytes: [UInt8], reason: String)] = [
            (Array("<plist><dict><key>LSRequiresIPhoneOS</key><true/>".utf8), "is not a property list"),
            (Array("bplist00 not really".utf8), "is not a well-formed binary property list"),
            (Array("<plist><array><string>x</string></array></plist>".utf8), "holds no dictionary at its top"),
            ([UInt8](repeating: 0x20, count: (1 << 20) + 1), "is over 1 MiB, more than an Info.plist holds"),
        ]
        for (bytes, reason) in damaged {
            try Data(bytes).write(to: URL(fileURLWithPath: app + "/Info.plist"))
            let said = try proxybundle(query)
            XCTAssertEqual(said.status, 0, said.error)
            XCTAssertEqual(said.output, without.output, "\(reason): the answer of a bundle without an Info.plist")
            let line = lines(said.error)
            XCTAssertEqual(line.count, 1, said.error)
            XCTAssertTrue(line.first?.hasPrefix("proxybundle: \(app)/Info.plist: \(reason)") == true, said.error)
            XCTAssertTrue(line.first?.hasSuffix("; read as a bundle without an Info.plist") == true, said.error)
        }
        // the bundle inside, searched too, is named with its own file; the app's is said once
        try Disk.write(app + "/Inner.bundle/Info.plist", "<plist><dict><key>A</key><integer>12a</integer></dict></plist>")
        let both = try proxybundle(query)
        XCTAssertEqual(both.output, without.output)
        XCTAssertEqual(lines(both.error).count, 2, both.error)
        XCTAssertTrue(both.error.contains("proxybundle: \(app)/Inner.bundle/Info.plist: is not a property list"), both.error)
        // a readable one is read, and nothing is said
        try Disk.write(app + "/Info.plist", info(["LSRequiresIPhoneOS": "<true/>"]))
        try FileManager.default.removeItem(atPath: app + "/Inner.bundle/Info.plist")
        let read = try proxybundle(["resolve", app, "Clip", "--type", "png"])
        XCTAssertEqual(read.output, "Clip~iphone.png\n")
        XCTAssertEqual(read.error, "")
    }

    func testCheckSaysAnUnreadableInfoPlistOnceAndChecksAsWithoutOne() throws {
        // the substitution hides the main bundle's Info.plist, then puts a damaged one in its place
        try Disk.write(fx.substitution + "/.wh.Info.plist", "")
        try fx.start()
        let without = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(without.error, "")
        try FileManager.default.removeItem(atPath: fx.substitution + "/.wh.Info.plist")
        try Disk.write(fx.substitution + "/Info.plist", "<?xml version=\"1.0\"?><plist><dict><key>UIDeviceFamily</key><array><integer>2")
        XCTAssertEqual(try proxybundle(["invalidate", fx.mountpoint]).status, 0)
        let said = try proxybundle(["check", fx.mountpoint])
        XCTAssertEqual(said.status, without.status, said.error)
        XCTAssertEqual(said.output, without.output, "the findings of a bundle without an Info.plist")
        let line = lines(said.error)
        XCTAssertEqual(line.count, 1, said.error)
        XCTAssertTrue(line.first?.hasPrefix("proxybundle: \(fx.mountpoint)/Info.plist: is not a property list") == true, said.error)
        XCTAssertTrue(line.first?.hasSuffix("; checked as a bundle without an Info.plist") == true, said.error)
        let json = try proxybundle(["check", fx.mountpoint, "--json"])
        XCTAssertEqual(lines(json.error), line, "said the same way with --json, standard output stays JSON")
    }
}
