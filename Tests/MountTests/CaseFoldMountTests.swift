import Foundation
import ProxyBundleCore
import XCTest

/// `-o casefold` (issue 38): names match ignoring case and Unicode normalization, directories
/// of one folded name merge across layers, whiteouts hide every spelling, and what is made or
/// copied up keeps a spelling of the layers'.
final class CaseFoldMountTests: XCTestCase {
    var fx: MountFixture!
    var patch = ""

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        patch = fx.root + "/patch"
        try Disk.mkdir(patch)
        // the main bundle as unpacked from a Windows archive, a patch written on macOS
        try Disk.write(fx.main + "/data/textures/rock.dds", "main rock")
        try Disk.write(fx.main + "/data/textures/grass.dds", "main grass")
        try Disk.write(fx.main + "/data/sounds/wind.ogg", "main wind")
        try Disk.write(fx.main + "/Readme.txt", "main readme")
        try Disk.write(fx.main + "/gone.txt", "main gone")
        try Disk.write(fx.main + "/Straße.txt", "main street")
        try Disk.write(patch + "/Data/Textures/Rock.DDS", "patch rock")
        try Disk.write(patch + "/Data/Textures/Sand.dds", "patch sand")
        try Disk.write(patch + "/.wh.GONE.TXT", "")
    }

    override func tearDown() {
        fx?.tearDown()
    }

    /// The names in `path` in byte order, the work area left out.
    private func names(_ path: String) throws -> [String] {
        try Disk.list(path).filter { $0 != ".wh..wh.work" }.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private func start(_ extra: [String] = []) throws {
        try fx.start(["-o", "casefold"] + extra, patches: [patch])
    }

    func testAnySpellingFindsTheEntryOfTheHighestLayer() throws {
        try start()
        XCTAssertEqual(try Disk.read(fx.inMount("data/textures/rock.dds")), "patch rock")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/TEXTURES/ROCK.DDS")), "patch rock")
        XCTAssertEqual(try Disk.read(fx.inMount("Data/textures/GRASS.dds")), "main grass")
        XCTAssertEqual(try Disk.read(fx.inMount("dAtA/SOUNDS/Wind.OGG")), "main wind")
        XCTAssertEqual(try Disk.read(fx.inMount("README.TXT")), "main readme")
        XCTAssertEqual(try Disk.read(fx.inMount("STRASSE.TXT")), "main street", "ß folds to ss")
        XCTAssertEqual(Disk.lstatError(fx.inMount("gone.txt")), ENOENT, "a whiteout of another spelling hides it")
        XCTAssertEqual(Disk.lstatError(fx.inMount("nothing.txt")), ENOENT)
    }

    func testDirectoriesOfOneFoldedNameMergeWithTheHighestSpelling() throws {
        try start()
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "Readme.txt", "Straße.txt"])
        XCTAssertEqual(try names(fx.inMount("data")), ["Textures", "sounds"])
        XCTAssertEqual(try names(fx.inMount("DATA/TEXTURES")), ["Rock.DDS", "Sand.dds", "grass.dds"])
        XCTAssertEqual(try names(fx.inMount("data/textures")), ["Rock.DDS", "Sand.dds", "grass.dds"])
    }

    func testWithoutCaseFoldingNamesStayApart() throws {
        try fx.start([], patches: [patch])
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "Readme.txt", "Straße.txt", "data", "gone.txt"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("README.TXT")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("gone.txt")), "main gone")
    }

    func testACreateOfAnotherSpellingOpensTheEntry() throws {
        try start()
        let fd = open(fx.inMount("readme.TXT"), O_WRONLY | O_APPEND | O_CREAT, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "+", 1), 1)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inMount("Readme.txt")), "main readme+")
        XCTAssertEqual(open(fx.inMount("README.txt"), O_WRONLY | O_CREAT | O_EXCL, 0o644), -1)
        XCTAssertEqual(errno, EEXIST)
        XCTAssertEqual(mkdir(fx.inMount("DATA"), 0o755), -1)
        XCTAssertEqual(errno, EEXIST)
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "Readme.txt", "Straße.txt"])
        XCTAssertEqual(try names(fx.substitution), ["Readme.txt"], "the copy keeps the main bundle's spelling")
    }

    func testACopyUpKeepsTheSpellingOfTheLayerItCopiesFrom() throws {
        try start()
        try Disk.write(fx.inMount("DATA/SOUNDS/WIND.OGG"), "new wind")
        try Disk.write(fx.inMount("DATA/TEXTURES/ROCK.DDS"), "new rock")
        XCTAssertEqual(try Disk.read(fx.inMount("data/sounds/wind.ogg")), "new wind")
        XCTAssertEqual(try Disk.read(fx.substitution + "/Data/sounds/wind.ogg"), "new wind")
        XCTAssertEqual(try Disk.read(fx.substitution + "/Data/Textures/Rock.DDS"), "new rock")
        XCTAssertEqual(try names(fx.substitution + "/Data"), ["Textures", "sounds"])
        XCTAssertEqual(try names(fx.inMount("data/textures")), ["Rock.DDS", "Sand.dds", "grass.dds"])
    }

    func testANewNameKeepsItsSpellingAndAnyFindsIt() throws {
        try start()
        try Disk.write(fx.inMount("data/Textures/Moss.DDS"), "moss")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/textures/moss.dds")), "moss")
        XCTAssertEqual(try names(fx.inMount("data/textures")), ["Moss.DDS", "Rock.DDS", "Sand.dds", "grass.dds"])
    }

    func testARemovalOfAnySpellingHidesEverySpellingBelow() throws {
        try start()
        XCTAssertEqual(unlink(fx.inMount("DATA/TEXTURES/ROCK.DDS")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("data/textures/rock.dds")), ENOENT)
        XCTAssertEqual(try names(fx.inMount("data/textures")), ["Sand.dds", "grass.dds"])
        XCTAssertEqual(unlink(fx.inMount("readme.txt")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("Readme.txt")), ENOENT)
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "Straße.txt"])
        try Disk.write(fx.inMount("README.TXT"), "again")
        XCTAssertEqual(try Disk.read(fx.inMount("readme.txt")), "again")
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "README.TXT", "Straße.txt"])
    }

    /// A directory's spellings are nodes of their own, so a rename that only changes its case
    /// reaches the daemon and respells it. A non-directory's spellings are one node (one
    /// kernel inode), so the kernel finds the two names one file and, as on Linux's own
    /// case-folding file systems, does nothing; a rename through another name respells it.
    func testARenameThatOnlyChangesCaseRespellsADirectory() throws {
        try start()
        XCTAssertEqual(rename(fx.inMount("Data/sounds"), fx.inMount("Data/Sounds")), 0, String(cString: strerror(errno)))
        XCTAssertEqual(try names(fx.inMount("data")), ["Sounds", "Textures"])
        XCTAssertEqual(try Disk.read(fx.inMount("data/sounds/wind.ogg")), "main wind")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/Sounds/WIND.ogg")), "main wind")

        XCTAssertEqual(rename(fx.inMount("Readme.txt"), fx.inMount("README.TXT")), 0)
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "Readme.txt", "Straße.txt"], "one file: nothing to do")
        XCTAssertEqual(rename(fx.inMount("Readme.txt"), fx.inMount("moved")), 0)
        XCTAssertEqual(rename(fx.inMount("moved"), fx.inMount("README.TXT")), 0)
        XCTAssertEqual(try names(fx.mountpoint), ["Data", "README.TXT", "Straße.txt"])
        XCTAssertEqual(try Disk.read(fx.inMount("readme.txt")), "main readme")
    }

    func testStatusStatsAndWhichSayCaseFoldIsOn() throws {
        try start()
        XCTAssertTrue(try Disk.read(fx.inMount(".stats")).contains("\ncasefold: on\n"))
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("casefold: on"), status.output)
        let which = try proxybundle(["which", fx.inMount("DATA/TEXTURES/ROCK.DDS")])
        XCTAssertEqual(which.output, "patch \(patch)/Data/Textures/Rock.DDS\n", which.error)
        let merged = try proxybundle(["which", fx.inMount("data/TEXTURES")])
        XCTAssertEqual(merged.output, "merged patch \(patch)/Data/Textures main \(fx.main)/data/textures\n", merged.error)
    }

    /// What a program written for Windows does: open every file by a path re-cased at random.
    func testEveryFileOpensByARandomlyRecasedPath() throws {
        var expected: [String: String] = [:]
        var generator = SystemRandomNumberGenerator()
        for index in 0 ..< 200 {
            let path = "Mod\(index % 7)/Sub\(index % 3)/File\(index).Txt"
            try Disk.write(patch + "/" + path, "content \(index)")
            expected[path] = "content \(index)"
        }
        try start()
        for (path, content) in expected {
            let recased = String(path.map { Bool.random(using: &generator) ? Character($0.uppercased()) : Character($0.lowercased()) })
            XCTAssertEqual(try Disk.read(fx.inMount(recased)), content, recased)
        }
    }
}
