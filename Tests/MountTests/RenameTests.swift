import CSyscalls
import Foundation
import XCTest

/// rename(2) of directories with main-bundle content, replacing a substitution directory, and
/// RENAME_EXCHANGE: the view after the call, after a remount, and what the substitution holds.
final class RenameTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func remount() throws {
        fx.stop()
        try fx.start()
    }

    func exchange(_ a: String, _ b: String) -> Int32 {
        pb_renameat2(AT_FDCWD, fx.inMount(a), AT_FDCWD, fx.inMount(b), pb_RENAME_EXCHANGE)
    }

    /// A directory moved onto a main-bundle name is marked opaque (a marker file inside it)
    /// and keeps its modification time, as with kernel overlayfs (an attribute there). Before
    /// the fix: the time of the rename (RandomOperationsTests, seeds 0xf and 0x12).
    func testADirectoryMarkedOpaqueByARenameKeepsItsTimes() throws {
        try Disk.write(fx.inSubstitution("moved/file"), "f")
        try Disk.mkdir(fx.inMain("target"))
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, fx.inSubstitution("moved"), &times, 0), 0)
        try fx.start()
        XCTAssertEqual(rename(fx.inMount("moved"), fx.inMount("target")), 0, "errno \(errno)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: fx.inSubstitution("target/.wh..wh..opq")), "fixture: marked opaque")
        XCTAssertEqual(Disk.lstat(fx.inMount("target"))?.st_mtim.tv_sec, 1_600_000_000)
    }

    func testDirectoryWithMainContentMovesWhole() throws {
        try Disk.write(fx.inMain("res/a.txt"), "a")
        try Disk.write(fx.inMain("res/sub/b.txt"), "b")
        try Disk.write(fx.inMain("res/gone"), "hidden")
        try Disk.write(fx.inSubstitution("res/p.txt"), "p")
        try Disk.whiteout(fx.inSubstitution("res"), "gone")
        try fx.start()
        XCTAssertEqual(rename(fx.inMount("res"), fx.inMount("moved")), 0, "errno \(errno)")
        for _ in 0..<2 {
            XCTAssertEqual(Disk.lstatError(fx.inMount("res")), ENOENT)
            XCTAssertEqual(try Disk.list(fx.inMount("moved")).sorted(), ["a.txt", "p.txt", "sub"])
            XCTAssertEqual(try Disk.read(fx.inMount("moved/sub/b.txt")), "b")
            XCTAssertEqual(try Disk.read(fx.inMount("moved/p.txt")), "p")
            try remount()
        }
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution(".wh.res")), "the source's main entry is whited out")
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("moved/.wh..wh..opq")), "the moved tree stands alone")
    }

    /// Moved away and back, a main-bundle directory leaves no whiteout beside itself in the
    /// substitution: a layer holding both `.wh.res` and `res/` is read two ways by the tools
    /// that apply it as an OCI layer (files were already cleaned up so).
    func testADirectoryMovedAwayAndBackLeavesNoWhiteoutBesideIt() throws {
        try Disk.write(fx.inMain("res/a.txt"), "a")
        try Disk.write(fx.inMain("file"), "f")
        try fx.start()
        for (name, other) in [("res", "moved"), ("file", "other")] {
            XCTAssertEqual(rename(fx.inMount(name), fx.inMount(other)), 0, "errno \(errno)")
            XCTAssertEqual(rename(fx.inMount(other), fx.inMount(name)), 0, "errno \(errno)")
            XCTAssertEqual(Disk.lstatError(fx.inSubstitution(".wh." + name)), ENOENT, "\(name) and its whiteout side by side")
        }
        for _ in 0..<2 {
            XCTAssertEqual(try Disk.list(fx.inMount("res")), ["a.txt"])
            XCTAssertEqual(try Disk.read(fx.inMount("file")), "f")
            try remount()
        }
    }

    func testDirectoryMovesOverAnEmptyMainDirectory() throws {
        try Disk.write(fx.inMain("src/file"), "from src")
        try Disk.mkdir(fx.inMain("empty"))
        try Disk.write(fx.inMain("full/x"), "x")
        try fx.start()
        XCTAssertEqual(rename(fx.inMount("src"), fx.inMount("full")), -1)
        XCTAssertEqual(errno, ENOTEMPTY)
        XCTAssertEqual(rename(fx.inMount("src"), fx.inMount("empty")), 0, "errno \(errno)")
        XCTAssertEqual(try Disk.list(fx.inMount("empty")), ["file"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("src")), ENOENT)
    }

    func testDirectoryReplacesASubstitutionDirectoryThatHoldsWhiteouts() throws {
        try Disk.write(fx.inMain("t/x"), "main x")
        try Disk.whiteout(fx.inSubstitution("t"), "x")
        try Disk.write(fx.inSubstitution("s/f"), "f")
        try fx.start()
        XCTAssertEqual(try Disk.list(fx.inMount("t")), [])
        XCTAssertEqual(rename(fx.inMount("s"), fx.inMount("t")), 0, "errno \(errno)")
        XCTAssertEqual(try Disk.list(fx.inMount("t")), ["f"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("s")), ENOENT)
        try remount()
        XCTAssertEqual(try Disk.list(fx.inMount("t")), ["f"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("s")), ENOENT)
    }

    func testExchangeAFileAndADirectoryAcrossLayers() throws {
        try Disk.write(fx.inMain("a"), "main file a")
        try Disk.write(fx.inSubstitution("d/inside"), "inside")
        try fx.start()
        XCTAssertEqual(exchange("a", "d"), 0, "errno \(errno)")
        for _ in 0..<2 {
            XCTAssertEqual(try Disk.read(fx.inMount("d")), "main file a")
            XCTAssertEqual(try Disk.list(fx.inMount("a")), ["inside"])
            try remount()
        }
    }

    func testExchangeTwoMainDirectories() throws {
        try Disk.write(fx.inMain("one/1"), "1")
        try Disk.write(fx.inMain("two/2"), "2")
        try fx.start()
        XCTAssertEqual(exchange("one", "two"), 0, "errno \(errno)")
        for _ in 0..<2 {
            XCTAssertEqual(try Disk.list(fx.inMount("one")), ["2"])
            XCTAssertEqual(try Disk.list(fx.inMount("two")), ["1"])
            try remount()
        }
    }

    func testExchangeWithAMissingNameFails() throws {
        try Disk.write(fx.inMain("a"), "a")
        try fx.start()
        XCTAssertEqual(exchange("a", "missing"), -1)
        XCTAssertEqual(errno, ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("a")), "a")
    }
}

extension RenameTests {
    /// Found by the random differential test: materializing copied the substitution's own
    /// files, splitting hard links and losing writes through the other name.
    func testRenamedDirectoryKeepsHardLinksIntoIt() throws {
        try Disk.write(fx.inMain("zeta/a"), "a")
        try fx.start()
        try Disk.write(fx.inMount("zeta/new"), "")
        XCTAssertEqual(link(fx.inMount("zeta/new"), fx.inMount("linked")), 0)
        XCTAssertEqual(rename(fx.inMount("zeta"), fx.inMount("zeta2")), 0, "errno \(errno)")
        try Disk.write(fx.inMount("linked"), "hello")
        XCTAssertEqual(Disk.lstat(fx.inMount("zeta2/new"))?.st_nlink, 2)
        try remount()
        XCTAssertEqual(try Disk.read(fx.inMount("zeta2/new")), "hello")
        XCTAssertEqual(Disk.lstat(fx.inMount("linked"))?.st_ino, Disk.lstat(fx.inMount("zeta2/new"))?.st_ino)
    }

    /// Moving a directory with main-bundle content copies it; every entry of the copy goes on
    /// showing the inode number it had (files, symlinks, directories at any depth) while the
    /// daemon runs.
    func testRenamedDirectoryKeepsTheInodeNumbersOfItsEntries() throws {
        try Disk.write(fx.inMain("m/a"), "a")
        try Disk.write(fx.inMain("m/sub/b"), "b")
        try Disk.symlink(fx.inMain("m/l"), to: "a")
        try fx.start()
        let names = ["", "/a", "/sub", "/sub/b", "/l"]
        let before = names.map { Disk.lstat(fx.inMount("m" + $0))?.st_ino }
        XCTAssertEqual(rename(fx.inMount("m"), fx.inMount("m2")), 0, "errno \(errno)")
        XCTAssertEqual(names.map { Disk.lstat(fx.inMount("m2" + $0))?.st_ino }, before)
        // the same numbers from the daemon, not from the kernel's inodes kept by the rename
        let fd = open(fx.inMount(".invalidate"), O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "/\n", 2), 2)
        close(fd)
        XCTAssertEqual(names.map { Disk.lstat(fx.inMount("m2" + $0))?.st_ino }, before, "after invalidating every cache")
    }
}
