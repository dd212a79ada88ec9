import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// `-o casefold` over a layer that spells one directory twice (`DATA/` beside `data/`, as an
/// archive made on Windows unpacks on Linux): the directories merge within the layer as they
/// do across layers, a name in both is taken from its first spelling in byte order, and of
/// two files of one folded name the first in byte order serves.
final class CaseFoldWithinLayerTests: XCTestCase {
    var fx: MountFixture!
    var patch = ""

    /// The main bundle holds `data/` and `DATA/` (and `a.txt` beside `A.txt`); the patch
    /// `Data/` and `data/`.
    static let mainFiles = [
        "data/sounds/wind.ogg": "main wind", "data/textures/grass.dds": "main grass",
        "DATA/Sounds/WIND.OGG": "main WIND", "DATA/Sounds/thunder.ogg": "main thunder",
        "DATA/TEXTURES/rock.dds": "main rock", "a.txt": "main a", "A.txt": "main A",
    ]
    static let patchFiles = ["Data/Textures/Rock.DDS": "patch rock", "data/textures/sand.dds": "patch sand"]

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        patch = fx.root + "/patch"
        for (path, text) in Self.mainFiles { try Disk.write(fx.main + "/" + path, text) }
        for (path, text) in Self.patchFiles { try Disk.write(patch + "/" + path, text) }
        guard setxattr(fx.main + "/data/textures/grass.dds", "user.colour", "green", 5, 0) == 0 else {
            throw TestFailure("setxattr: errno \(errno)")
        }
    }

    override func tearDown() {
        fx?.tearDown()
    }

    private func names(_ path: String) throws -> [String] {
        try Disk.list(path).filter { $0 != ".wh..wh.work" }.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private func start() throws {
        try fx.start(["-o", "casefold"], patches: [patch])
    }

    func testTwoSpellingsOfADirectoryInOneLayerMerge() throws {
        try start()
        XCTAssertEqual(try names(fx.mountpoint), ["A.txt", "Data"], "A.txt comes first in byte order; Data is the patch's")
        XCTAssertEqual(try names(fx.inMount("data")), ["Sounds", "Textures"])
        XCTAssertEqual(try names(fx.inMount("data/sounds")), ["WIND.OGG", "thunder.ogg"])
        XCTAssertEqual(try names(fx.inMount("DATA/textures")), ["Rock.DDS", "grass.dds", "sand.dds"])
        XCTAssertEqual(try Disk.read(fx.inMount("data/sounds/wind.ogg")), "main WIND", "WIND.OGG comes before wind.ogg")
        XCTAssertEqual(try Disk.read(fx.inMount("Data/SOUNDS/Thunder.ogg")), "main thunder")
        XCTAssertEqual(try Disk.read(fx.inMount("data/textures/GRASS.dds")), "main grass")
        XCTAssertEqual(try Disk.read(fx.inMount("data/textures/sand.dds")), "patch sand")
        XCTAssertEqual(try Disk.read(fx.inMount("data/textures/rock.dds")), "patch rock")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "main A")
        var value = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(lgetxattr(fx.inMount("DATA/TEXTURES/GRASS.DDS"), "user.colour", &value, value.count), 5,
                       "an attribute of a file in the second spelling, read beside its directory")
        XCTAssertEqual(Array(value.prefix(5)), Array("green".utf8))
        // a walk sees every entry of both spellings, and stat agrees with the listing
        let walked = try MergedView.walk(fx.mountpoint).keys.sorted()
        XCTAssertEqual(walked, ["", "A.txt", "Data", "Data/Sounds", "Data/Sounds/WIND.OGG", "Data/Sounds/thunder.ogg",
                                "Data/Textures", "Data/Textures/Rock.DDS", "Data/Textures/grass.dds", "Data/Textures/sand.dds"])
    }

    /// `which` names every real directory that serves a merged directory, each as its layer
    /// spells it: both of the main bundle's (`DATA/`, `data/`) and both of the patch's
    /// (issue 45: only the first of a layer was named).
    func testWhichNamesEveryRealDirectoryOfAMergedDirectory() throws {
        try start()
        let which = try proxybundle(["which", fx.inMount("Data")])
        XCTAssertEqual(which.status, 0, which.error)
        XCTAssertEqual(which.output, "merged patch \(patch)/Data patch \(patch)/data main \(fx.main)/DATA main \(fx.main)/data\n")
        let one = try proxybundle(["which", fx.inMount("data/sounds")])
        XCTAssertEqual(one.output, "merged main \(fx.main)/DATA/Sounds main \(fx.main)/data/sounds\n")
    }

    func testAnOpaqueMarkerInEitherSpellingHidesTheLayersBelow() throws {
        try Disk.write(patch + "/data/textures/.wh..wh..opq", "")
        try start()
        XCTAssertEqual(try names(fx.inMount("DATA/TEXTURES")), ["Rock.DDS", "sand.dds"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("data/textures/grass.dds")), ENOENT)
    }

    func testAWriteCopiesUpFromTheDirectoryThatHoldsTheName() throws {
        try start()
        try Disk.write(fx.inMount("DATA/sounds/THUNDER.OGG"), "written thunder")
        XCTAssertEqual(try Disk.read(fx.inMount("data/sounds/thunder.ogg")), "written thunder")
        XCTAssertEqual(try Disk.read(fx.substitution + "/Data/Sounds/thunder.ogg"), "written thunder",
                       "each directory keeps the spelling of the layer it was copied from")
        XCTAssertEqual(try names(fx.inMount("data/sounds")), ["WIND.OGG", "thunder.ogg"])
        XCTAssertEqual(unlink(fx.inMount("data/sounds/wind.ogg")), 0)
        XCTAssertEqual(try names(fx.inMount("data/sounds")), ["thunder.ogg"], "the removal hides every spelling below")
        XCTAssertEqual(try Disk.read(fx.main + "/data/sounds/wind.ogg"), "main wind", "the main bundle is left alone")
    }

    func testALayerChangedOnDiskIsSeenAfterAnInvalidation() throws {
        try start()
        XCTAssertEqual(try names(fx.inMount("data/sounds")), ["WIND.OGG", "thunder.ogg"])
        try Disk.write(fx.main + "/data/sounds/rain.ogg", "main rain")
        try fx.acceptMainBundleAsItIs()
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try names(fx.inMount("DATA/SOUNDS")), ["WIND.OGG", "rain.ogg", "thunder.ogg"])
        XCTAssertEqual(try Disk.read(fx.inMount("data/Sounds/RAIN.ogg")), "main rain")
    }

    func testASymlinkSpellingOfADirectoryIsNeverFollowed() throws {
        try Disk.write(fx.root + "/outside/secret.txt", "outside")
        // the directory's spelling comes first in byte order, so the directory serves the name
        guard symlink(fx.root + "/outside", fx.main + "/datb") == 0, symlink("../outside", fx.main + "/Datb") == 0 else {
            throw TestFailure("symlink: errno \(errno)")
        }
        try Disk.write(fx.main + "/DATB/own.txt", "main own")
        try start()
        XCTAssertEqual(try names(fx.inMount("datb")), ["own.txt"], "of the three spellings, only the directory merges")
        XCTAssertEqual(try Disk.read(fx.inMount("DATB/OWN.TXT")), "main own")
        XCTAssertEqual(Disk.lstatError(fx.inMount("datb/secret.txt")), ENOENT)
    }
}
