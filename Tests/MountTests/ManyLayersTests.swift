import Foundation
import ProxyBundleCore
import XCTest

/// Mounts of hundreds and thousands of patches, as mod managers stack them: given by
/// `--patches-from` (a file, or standard input) and `-o patches-from=`, each patch's own file
/// reachable, the first patch winning, a refused list naming the patch by its position, and the
/// limit said in one line.
final class ManyLayersTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
    }

    override func tearDown() {
        fx?.tearDown()
    }

    /// `count` patches under the fixture's root (`patches/N`), each with a file of its own and
    /// its version of `shared`; their list, one a line, in `list`.
    @discardableResult
    func makePatches(_ count: Int, list: String) throws -> [String] {
        let paths = (0..<count).map { fx.root + "/patches/\($0)" }
        for (index, path) in paths.enumerated() {
            try Disk.write(path + "/own\(index)", "\(index)")
            try Disk.write(path + "/shared", "\(index)")
        }
        try Disk.write(list, paths.joined(separator: "\n") + "\n")
        try fx.guardUnchanged(paths)
        return paths
    }

    func testThreeHundredPatchesFromAFile() throws {
        let list = fx.root + "/patches.list"
        try makePatches(300, list: list)
        try fx.start(["--patches-from", list])
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("shared"), encoding: .utf8), "0", "the first patch wins")
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("own299"), encoding: .utf8), "299")
        let names = try FileManager.default.contentsOfDirectory(atPath: fx.mountpoint)
        XCTAssertEqual(names.filter { $0.hasPrefix("own") }.count, 300)
        let layers = try String(contentsOfFile: fx.inMount(".layers"), encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(layers.count, 302)
        XCTAssertEqual(layers[300], "patch \(fx.root)/patches/299")
        XCTAssertEqual(try fx.figure("layers"), 302)
        XCTAssertEqual(try fx.figure("layers_open"), 302, "every layer holds its descriptor")
        XCTAssertTrue(fx.log.contains("under 300 patches, \(fx.root)/patches/0 to \(fx.root)/patches/299"), fx.log)
        // the mount is reported ready once every patch's index is read, as its log line says
        XCTAssertTrue(fx.log.contains("(300 directories of the patches read)"), fx.log)
    }

    /// Ten thousand patches, the limit, from standard input; one more is refused in one line
    /// that names the limit. The daemon raises its own open-file limit for them.
    func testTheLimitOfTenThousandPatchesFromStandardInput() throws {
        let list = fx.root + "/patches.list"
        let paths = (0..<LayerList.patchLimit).map { fx.root + "/p/\($0)" }
        for path in paths { try Disk.mkdir(path) }
        try Disk.write(paths.last! + "/last", "the ten-thousandth")
        try Disk.write(list, paths.joined(separator: "\n") + "\n")
        let mount = "\(MountFixture.binary) mount \(fx.main) \(fx.mountpoint) --substitution \(fx.substitution) --patches-from - < \(list)"
        let started = try Spawn.run("/bin/sh", ["-c", mount], seconds: 120)
        XCTAssertEqual(started.status, 0, started.error)
        defer { Unmounter.force(fx.mountpoint) }
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("last"), encoding: .utf8), "the ten-thousandth")
        XCTAssertNil(Disk.lstat(fx.inMount("missing")), "a missing name: every layer looked at")
        Unmounter.force(fx.mountpoint)

        try Disk.mkdir(fx.root + "/one-more")
        try Disk.write(list, (paths + [fx.root + "/one-more"]).joined(separator: "\n"))
        let refused = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                          "--patches-from", list], seconds: 120)
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.error, "proxybundle: 10001 patches are more than a mount takes (10000)\n")
    }

    /// A list's problems are told by position: a patch inside another, one given twice, the
    /// main bundle inside a patch; an unreadable list by its name.
    func testARefusedListNamesThePatchByPosition() throws {
        let list = fx.root + "/patches.list"
        let paths = try makePatches(6, list: list)
        let cases: [([String], String)] = [
            ([paths[0], paths[1], paths[4] + "/inner", paths[4]], "patch 3 (\(paths[4])/inner) is inside patch 4 (\(paths[4]))"),
            ([paths[2], paths[3], paths[2]], "patch 3 (\(paths[2])) is the same directory as patch 1 (\(paths[2]))"),
            ([paths[1], fx.root], "the main bundle \(fx.main) is inside patch 2 (\(fx.root))"),
        ]
        try Disk.mkdir(paths[4] + "/inner")
        try fx.guardUnchanged([paths[4]])  // changed by the test itself
        for (patches, message) in cases {
            try Disk.write(list, patches.joined(separator: "\n"))
            let result = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                            "-o", "patches-from=\(list)"])
            XCTAssertEqual(result.status, 1, message)
            XCTAssertEqual(result.error, "proxybundle: \(message)\n")
            XCTAssertFalse(fx.isMounted)
        }
        let missing = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--patches-from", fx.root + "/nowhere"])
        XCTAssertEqual(missing.error, "proxybundle: cannot read the patch list \(fx.root)/nowhere: No such file or directory\n")
    }

    /// `layers --set --patches-from` swaps in a list longer than one write to `.layers` carries.
    func testSwappingInThousandsOfPatches() throws {
        try fx.start()
        let list = fx.root + "/patches.list"
        let paths = try makePatches(3_000, list: list)
        XCTAssertGreaterThan(paths.joined(separator: "\n").utf8.count, 128 * 1024, "more than one FUSE write")
        let set = try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint, "--set", "--patches-from", list], seconds: 120)
        XCTAssertEqual(set.status, 0, set.error)
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("own2999"), encoding: .utf8), "2999")
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("shared"), encoding: .utf8), "0")
        XCTAssertEqual(try String(contentsOfFile: fx.inMount(".layers"), encoding: .utf8).split(separator: "\n").count, 3_002)
    }
}
