import Foundation
import ProxyBundleCore
import XCTest

/// Patches on the command line: `--patch`, `-o patches=`, `proxybundle layers`, and what
/// `which` and `status` say of them.
final class PatchCommandLineTests: XCTestCase {
    var fx: MountFixture!
    var hotfix = ""
    var base = ""

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        hotfix = fx.root + "/hotfix"
        base = fx.root + "/base"
        try Disk.write(fx.inMain("icon.png"), "main")
        try Disk.write(fx.inMain("only-main"), "main")
        try Disk.write(base + "/icon.png", "base")
        try Disk.write(base + "/only-base", "base")
        try Disk.write(hotfix + "/icon.png", "hotfix")
        try Disk.mkdir(fx.inMain("dir"))
        try Disk.write(hotfix + "/dir/h", "h")
    }

    override func tearDown() {
        _ = try? proxybundle(["unmount", fx.mountpoint])
        fx?.tearDown()
    }

    private func mount(_ extra: [String]) throws {
        try fx.guardUnchanged([fx.main, hotfix, base])
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution] + extra)
        XCTAssertEqual(result.status, 0, result.error)
        guard result.status == 0 else { throw TestFailure("mount failed: \(result.error)") }
    }

    func testPatchesStackInTheOrderGivenAndLayersPrintsThem() throws {
        try mount(["--patch", hotfix, "--patch", base])
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "hotfix", "the first --patch wins")
        XCTAssertEqual(try Disk.read(fx.inMount("only-base")), "base")
        XCTAssertEqual(try Disk.read(fx.inMount("only-main")), "main")
        let layers = try proxybundle(["layers", fx.mountpoint])
        XCTAssertEqual(layers.status, 0, layers.error)
        XCTAssertEqual(layers.output, "substitution \(fx.substitution)\npatch \(hotfix)\npatch \(base)\nmain \(fx.main)\n")
        XCTAssertEqual(try Disk.read(fx.inMount(".layers")), layers.output)
    }

    /// `-o patches=` (as mount(8) and fstab pass it), with `\:` for a colon in a path; after any
    /// `--patch`.
    func testPatchesOptionTakesEscapedColons() throws {
        let odd = fx.root + "/odd:name"
        try Disk.write(odd + "/icon.png", "odd")
        try mount(["--patch", hotfix, "-o", "patches=" + odd.replacingOccurrences(of: ":", with: "\\:") + ":" + base])
        let layers = try proxybundle(["layers", fx.mountpoint]).output
        XCTAssertEqual(layers, "substitution \(fx.substitution)\npatch \(hotfix)\npatch \(odd)\npatch \(base)\nmain \(fx.main)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "hotfix")
    }

    func testLayersSetReplacesThePatchesAndEmptySetRemovesThem() throws {
        try mount(["--patch", base])
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "base")
        let set = try proxybundle(["layers", fx.mountpoint, "--set", hotfix, base])
        XCTAssertEqual(set.status, 0, set.error)
        XCTAssertEqual(set.output, "substitution \(fx.substitution)\npatch \(hotfix)\npatch \(base)\nmain \(fx.main)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "hotfix", "seen at once, without .invalidate")
        let cleared = try proxybundle(["layers", fx.mountpoint, "--set"])
        XCTAssertEqual(cleared.status, 0, cleared.error)
        XCTAssertEqual(cleared.output, "substitution \(fx.substitution)\nmain \(fx.main)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "main")
        XCTAssertEqual(Disk.lstatError(fx.inMount("only-base")), ENOENT)
        // relative paths are the caller's
        let relative = try Spawn.run("/bin/sh", ["-c", "cd '\(fx.root)' && '\(MountFixture.binary)' layers mnt --set base"])
        XCTAssertEqual(relative.status, 0, relative.error)
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "base")
    }

    func testLayersRefusesBadDirectoriesWithOneLine() throws {
        try mount(["--patch", base])
        try Disk.write(fx.root + "/file", "x")
        let cases: [([String], String)] = [
            ([fx.root + "/missing"], "does not exist"),
            ([fx.root + "/file"], "is not a directory"),
            ([base, base], "is the same directory as patch"),
            ([fx.main], "is the same directory as the main bundle"),
            ([fx.inMain("dir")], "is inside the main bundle"),
            ([fx.inMount("dir")], "inside the mountpoint"),
        ]
        for (directories, message) in cases {
            let result = try proxybundle(["layers", fx.mountpoint, "--set"] + directories)
            XCTAssertEqual(result.status, 1, "\(directories)")
            XCTAssertTrue(result.error.contains(message), "\(directories): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
        }
        XCTAssertEqual(try Disk.read(fx.inMount("icon.png")), "base", "nothing changed")
        let notMount = try proxybundle(["layers", fx.root])
        XCTAssertEqual(notMount.status, 1)
        XCTAssertTrue(notMount.error.contains("is not a proxybundle mount"), notMount.error)
        let withoutSet = try proxybundle(["layers", fx.mountpoint, hotfix])
        XCTAssertNotEqual(withoutSet.status, 0)
        XCTAssertTrue(withoutSet.error.contains("--set"), withoutSet.error)
    }

    /// A patch that is missing, not a directory, the same as another layer, inside another
    /// layer or inside the mountpoint: one line, non-zero exit, no mount.
    func testBadPatchesAreRefusedUpFront() throws {
        try Disk.write(fx.root + "/file", "x")
        try Disk.mkdir(fx.inSubstitution("inner"))
        try Disk.mkdir(base + "/inner")
        let cases: [([String], String)] = [
            (["--patch", fx.root + "/missing"], "patch \(fx.root)/missing does not exist"),
            (["--patch", fx.root + "/file"], "is not a directory"),
            (["--patch", fx.main], "is the same directory as the main bundle"),
            (["--patch", fx.substitution], "is the same directory as the substitution directory"),
            (["--patch", base, "--patch", base], "is the same directory as patch"),
            (["--patch", fx.inMain("dir")], "is inside the main bundle"),
            (["--patch", fx.inSubstitution("inner")], "is inside the substitution directory"),
            (["--patch", base, "--patch", base + "/inner"], "is inside patch"),
            (["--patch", fx.root], "is inside patch"),
            (["--patch", fx.inMount("sub")], "does not exist"),
            (["-o", "patches=" + fx.root + "/missing"], "does not exist"),
        ]
        for (extra, message) in cases {
            let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution] + extra)
            XCTAssertEqual(result.status, 1, "\(extra)")
            XCTAssertTrue(result.error.contains(message), "\(extra): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
            XCTAssertFalse(fx.isMounted, "\(extra) mounted")
        }
        // a mountpoint inside a patch would contain itself
        let inside = base + "/inner"
        let result = try proxybundle(["mount", fx.main, inside, "--substitution", fx.substitution, "--patch", base])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.error.contains("is inside patch"), result.error)
    }

    func testWhichAndStatusNameThePatches() throws {
        try mount(["--patch", hotfix, "--patch", base])
        let cases: [(String, String)] = [
            ("icon.png", "patch \(hotfix)/icon.png"),
            ("only-base", "patch \(base)/only-base"),
            ("only-main", "main \(fx.main)/only-main"),
            ("dir", "merged patch \(hotfix)/dir main \(fx.main)/dir"),
            ("", "merged substitution \(fx.substitution) patch \(hotfix) patch \(base) main \(fx.main)"),
        ]
        for (path, expected) in cases {
            let result = try proxybundle(["which", fx.inMount(path)])
            XCTAssertEqual(result.status, 0, "\(path): \(result.error)")
            XCTAssertEqual(result.output, expected + "\n", path)
        }
        try Disk.whiteout(hotfix, "only-base")
        try fx.guardUnchanged([hotfix])  // changed by the test itself
        XCTAssertEqual(try proxybundle(["which", fx.inMount("only-base")]).output, "hidden by whiteout \(hotfix)/.wh.only-base\n")
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("  patch: \(hotfix)\n  patch: \(base)\n"), status.output)
        let json = try proxybundle(["status", fx.mountpoint, "--json"]).output
        XCTAssertTrue(json.contains("\"patches\":[\"\(hotfix)\",\"\(base)\"]"), json)
        XCTAssertTrue(json.contains("{\"role\":\"patch\",\"path\":\"\(base)\"}"), json)
        XCTAssertFalse(json.contains("\"patch\":"), "no repeated keys in the stats object: \(json)")
    }
}
