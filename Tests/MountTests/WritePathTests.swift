import CSyscalls
import Foundation
import XCTest

/// Everything written through the mount lands in the substitution; the main bundle is never
/// touched (the fixture checksums it after every test).
final class WritePathTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func testCreateWriteAndMkdirLandInTheSubstitution() throws {
        try Disk.mkdir(fx.inMain("res/deep"), mode: 0o750)
        try fx.start()
        try Disk.write(fx.inMount("res/deep/new.txt"), "hello")
        XCTAssertEqual(mkdir(fx.inMount("res/deep/newdir"), 0o700), 0)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("res/deep/new.txt")), "hello")
        XCTAssertEqual(try Disk.read(fx.inMount("res/deep/new.txt")), "hello")
        // missing parents were created in the substitution with the main bundle's mode
        XCTAssertEqual(Disk.lstat(fx.inSubstitution("res/deep")).map { $0.st_mode & 0o7777 }, 0o750)
        XCTAssertEqual(Disk.lstat(fx.inSubstitution("res/deep/newdir")).map { $0.st_mode & 0o7777 }, 0o700)
        XCTAssertEqual(Disk.lstatError(fx.inMain("res/deep/new.txt")), ENOENT)
    }

    func testCopyUpKeepsDataModeOwnerTimesAndXattrs() throws {
        try Disk.write(fx.inMain("data.bin"), String(repeating: "0123456789", count: 100_000), mode: 0o640)
        XCTAssertEqual(chown(fx.inMain("data.bin"), 4321, 8765), 0)
        XCTAssertEqual(setxattr(fx.inMain("data.bin"), "user.origin", "main", 4, 0), 0)
        var times = [timespec(tv_sec: 1_500_000_000, tv_nsec: 5), timespec(tv_sec: 1_600_000_000, tv_nsec: 7)]
        XCTAssertEqual(utimensat(AT_FDCWD, fx.inMain("data.bin"), &times, 0), 0)
        try fx.start()
        let fd = open(fx.inMount("data.bin"), O_WRONLY)  // copy-up without changing anything
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        guard let copy = Disk.lstat(fx.inSubstitution("data.bin")), let original = Disk.lstat(fx.inMain("data.bin")) else {
            return XCTFail("no copy in the substitution")
        }
        XCTAssertEqual(copy.st_size, original.st_size)
        XCTAssertEqual(copy.st_mode, original.st_mode)
        XCTAssertEqual(copy.st_uid, 4321)
        XCTAssertEqual(copy.st_gid, 8765)
        XCTAssertEqual(copy.st_mtim.tv_sec, 1_600_000_000)
        XCTAssertEqual(copy.st_mtim.tv_nsec, 7)
        XCTAssertEqual(try ContentHash.of(fx.inSubstitution("data.bin")), try ContentHash.of(fx.inMain("data.bin")))
        var value = [CChar](repeating: 0, count: 8)
        XCTAssertEqual(getxattr(fx.inSubstitution("data.bin"), "user.origin", &value, value.count), 4)
        XCTAssertEqual(try Disk.list(fx.inSubstitution(".wh..wh.work")), [], "no temporary file is left behind")
    }

    func testAppendAndTruncateCopyUpReadOnlyMainFiles() throws {
        try Disk.write(fx.inMain("ro.txt"), "original", mode: 0o444)
        try Disk.write(fx.inMain("trunc.txt"), "will be emptied")
        try fx.start()
        let fd = open(fx.inMount("ro.txt"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, "root may write a 0444 file after copy-up")
        XCTAssertEqual(write(fd, "+more", 5), 5)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inMount("ro.txt")), "original+more")
        XCTAssertEqual(truncate(fx.inMount("trunc.txt"), 4), 0)
        XCTAssertEqual(try Disk.read(fx.inMount("trunc.txt")), "will")
        try Disk.write(fx.inMount("ro.txt"), "replaced", mode: 0o444)  // O_TRUNC
        XCTAssertEqual(try Disk.read(fx.inSubstitution("ro.txt")), "replaced")
        XCTAssertEqual(chmod(fx.inMount("ro.txt"), 0o600), 0)
        XCTAssertEqual(Disk.lstat(fx.inMount("ro.txt")).map { $0.st_mode & 0o777 }, 0o600)
    }

    func testSparseFilesStaySparseOnCopyUp() throws {
        let fd = open(fx.inMain("sparse"), O_WRONLY | O_CREAT, 0o644)
        XCTAssertEqual(ftruncate(fd, 256 << 20), 0)
        XCTAssertEqual(pwrite(fd, "tail", 4, (256 << 20) - 4), 4)
        close(fd)
        try fx.start()
        XCTAssertEqual(chmod(fx.inMount("sparse"), 0o600), 0)
        let copy = Disk.lstat(fx.inSubstitution("sparse"))
        XCTAssertEqual(copy?.st_size, 256 << 20)
        XCTAssertLessThan(Int(copy?.st_blocks ?? .max), 1024, "the copy should stay sparse")
        XCTAssertEqual(try ContentHash.of(fx.inMount("sparse")), try ContentHash.of(fx.inMain("sparse")))
    }

    /// Data, then a hole to the end: the copy's size comes from truncating, not from its data.
    func testATrailingHoleKeepsItsSizeOnCopyUp() throws {
        let fd = open(fx.inMain("trailing"), O_WRONLY | O_CREAT, 0o644)
        XCTAssertEqual(pwrite(fd, "head", 4, 0), 4)
        XCTAssertEqual(ftruncate(fd, 64 << 20), 0)
        close(fd)
        try Disk.write(fx.inMain("plain"), "no hole")
        try fx.start()
        XCTAssertEqual(chmod(fx.inMount("trailing"), 0o600), 0)
        XCTAssertEqual(chmod(fx.inMount("plain"), 0o600), 0)
        XCTAssertEqual(Disk.lstat(fx.inSubstitution("trailing"))?.st_size, 64 << 20)
        XCTAssertEqual(try ContentHash.of(fx.inMount("trailing")), try ContentHash.of(fx.inMain("trailing")))
        XCTAssertEqual(try Disk.read(fx.inSubstitution("plain")), "no hole")
    }

    func testUnlinkWritesAWhiteoutAndRecreatingRemovesIt() throws {
        try Disk.write(fx.inMain("a"), "main a")
        try Disk.write(fx.inMain("b"), "main b")
        try Disk.write(fx.inSubstitution("b"), "patch b")
        try fx.start()
        XCTAssertEqual(unlink(fx.inMount("a")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("a")), ENOENT)
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution(".wh.a")))
        // deleting the substitution's copy must not expose the main one
        XCTAssertEqual(unlink(fx.inMount("b")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("b")), ENOENT)
        XCTAssertEqual(try Disk.list(fx.mountpoint), [])
        // creating the name again removes its whiteout
        XCTAssertEqual(symlink("target", fx.inMount("a")), 0)
        XCTAssertEqual(Disk.readLink(fx.inMount("a")), "target")
        XCTAssertEqual(Disk.lstatError(fx.inSubstitution(".wh.a")), ENOENT)
    }

    func testUnlinkFailsAndChangesNothingWhenTheWhiteoutCannotBeWritten() throws {
        try Disk.write(fx.inMain("dir/keep"), "main")
        try Disk.mkdir(fx.inSubstitution("dir"), mode: 0o755)
        try fx.start()
        // a full directory can't be simulated simply; an immutable one refuses new entries
        guard chattr(fx.inSubstitution("dir"), immutable: true) else { throw XCTSkip("chattr +i not available") }
        defer { _ = chattr(fx.inSubstitution("dir"), immutable: false) }
        XCTAssertEqual(unlink(fx.inMount("dir/keep")), -1)
        XCTAssertEqual(try Disk.read(fx.inMount("dir/keep")), "main")
    }

    func testRmdirRefusesDirectoriesThatStillShowEntries() throws {
        try Disk.write(fx.inMain("full/file"), "x")
        try Disk.mkdir(fx.inMain("empty"))
        try Disk.write(fx.inMain("mixed/gone"), "x")
        try fx.start()
        XCTAssertEqual(rmdir(fx.inMount("full")), -1)
        XCTAssertEqual(errno, ENOTEMPTY)
        XCTAssertEqual(rmdir(fx.inMount("empty")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("empty")), ENOENT)
        XCTAssertEqual(unlink(fx.inMount("mixed/gone")), 0)
        XCTAssertEqual(rmdir(fx.inMount("mixed")), 0, "a directory emptied through whiteouts can go")
        XCTAssertEqual(try Disk.list(fx.mountpoint), ["full"])
    }

    func testRecreatedDirectoryStartsEmpty() throws {
        try Disk.write(fx.inMain("d/old1"), "1")
        try Disk.write(fx.inMain("d/old2"), "2")
        try fx.start()
        XCTAssertEqual(unlink(fx.inMount("d/old1")), 0)
        XCTAssertEqual(unlink(fx.inMount("d/old2")), 0)
        XCTAssertEqual(rmdir(fx.inMount("d")), 0)
        XCTAssertEqual(mkdir(fx.inMount("d"), 0o755), 0)
        XCTAssertEqual(try Disk.list(fx.inMount("d")), [])
        XCTAssertEqual(Disk.lstatError(fx.inMount("d/old1")), ENOENT)
        XCTAssertEqual(rmdir(fx.inMount("d")), 0, "an opaque empty directory can be removed again")
    }

    func testWhiteoutNamesCannotBeCreatedAndLongNamesFail() throws {
        try Disk.write(fx.inMain("x"), "x")
        try fx.start()
        XCTAssertEqual(open(fx.inMount(".wh.x"), O_WRONLY | O_CREAT, 0o644), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(mkdir(fx.inMount(".wh..wh..opq"), 0o755), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(rename(fx.inMount("x"), fx.inMount(".wh.y")), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(link(fx.inMount("x"), fx.inMount(".wh..wh.work")), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(mkdir(fx.inMount(String(repeating: "n", count: 256)), 0o755), -1)
        XCTAssertEqual(errno, ENAMETOOLONG)
        XCTAssertEqual(try Disk.read(fx.inMount("x")), "x")
    }

    func testRenameFilesAcrossLayers() throws {
        try Disk.write(fx.inMain("from-main"), "main content", mode: 0o444)
        try Disk.write(fx.inMain("target"), "old target")
        try Disk.write(fx.inMain("dir/inner"), "inner")
        try fx.start()
        XCTAssertEqual(rename(fx.inMount("from-main"), fx.inMount("dir/moved")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("from-main")), ENOENT, "the main file stays hidden at the old name")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/moved")), "main content")
        XCTAssertEqual(rename(fx.inMount("dir/moved"), fx.inMount("target")), 0)
        XCTAssertEqual(try Disk.read(fx.inMount("target")), "main content")
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["dir", "target"])
        XCTAssertEqual(pb_renameat2(AT_FDCWD, fx.inMount("dir/inner"), AT_FDCWD, fx.inMount("target"), pb_RENAME_NOREPLACE), -1)
        XCTAssertEqual(errno, EEXIST)
        XCTAssertEqual(mkdir(fx.inMount("newdir"), 0o755), 0)
        XCTAssertEqual(rename(fx.inMount("newdir"), fx.inMount("renamed")), 0, "a directory only in the substitution moves")
        XCTAssertNotNil(Disk.lstat(fx.inMount("renamed")))
    }

    func testHardLinkToAMainFileSharesOneInode() throws {
        try Disk.write(fx.inMain("orig"), "shared")
        try fx.start()
        XCTAssertEqual(link(fx.inMount("orig"), fx.inMount("alias")), 0)
        let a = Disk.lstat(fx.inMount("orig"))
        let b = Disk.lstat(fx.inMount("alias"))
        XCTAssertEqual(a?.st_ino, b?.st_ino)
        XCTAssertEqual(b?.st_nlink, 2)
        let fd = open(fx.inMount("alias"), O_WRONLY | O_APPEND)
        XCTAssertEqual(write(fd, "!", 1), 1)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inMount("orig")), "shared!")
    }

    func testUnlinkedOpenFileReportsNoLinks() throws {
        try fx.start()
        try Disk.write(fx.inMount("tmp"), "data")
        let fd = open(fx.inMount("tmp"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertEqual(unlink(fx.inMount("tmp")), 0)
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertEqual(st.st_nlink, 0)
    }

    func testUtimensNowAndOmit() throws {
        try Disk.write(fx.inMain("t"), "t")
        var old = [timespec(tv_sec: 1_000, tv_nsec: 0), timespec(tv_sec: 2_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, fx.inMain("t"), &old, 0), 0)
        try fx.start()
        // (the fixture's checksum read may have moved main's atime under relatime)
        let before = Disk.lstat(fx.inMount("t"))
        var change = [timespec(tv_sec: 0, tv_nsec: pb_UTIME_OMIT), timespec(tv_sec: 0, tv_nsec: pb_UTIME_NOW)]
        XCTAssertEqual(utimensat(AT_FDCWD, fx.inMount("t"), &change, 0), 0)
        let st = Disk.lstat(fx.inMount("t"))
        XCTAssertEqual(st?.st_atim.tv_sec, before?.st_atim.tv_sec, "atime omitted")
        XCTAssertEqual(st?.st_atim.tv_nsec, before?.st_atim.tv_nsec, "atime omitted")
        XCTAssertGreaterThan(st?.st_mtim.tv_sec ?? 0, 1_000_000_000, "mtime now")
    }

    private func chattr(_ path: String, immutable: Bool) -> Bool {
        guard let result = try? Spawn.run("/usr/bin/chattr", [immutable ? "+i" : "-i", path]) else { return false }
        return result.status == 0
    }
}

extension WritePathTests {
    /// sqlite compares a database's inode number before each write transaction: copy-up must
    /// not change it (found with sqlite3 on a main-bundle database).
    func testCopiedUpFileKeepsItsInodeNumber() throws {
        try Disk.write(fx.inMain("db"), "data")
        try Disk.mkdir(fx.inMain("dir"))
        try fx.start()
        let before = try XCTUnwrap(Disk.lstat(fx.inMount("db"))).st_ino
        let fd = open(fx.inMount("db"), O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertEqual(st.st_ino, before)
        XCTAssertEqual(pwrite(fd, "DATA", 4, 0), 4)
        XCTAssertEqual(fstat(fd, &st), 0)
        XCTAssertEqual(st.st_ino, before, "after a write")
        XCTAssertEqual(Disk.lstat(fx.inMount("db"))?.st_ino, before)
        let dirBefore = try XCTUnwrap(Disk.lstat(fx.inMount("dir"))).st_ino
        try Disk.write(fx.inMount("dir/new"), "copies the directory up")
        XCTAssertEqual(Disk.lstat(fx.inMount("dir"))?.st_ino, dirBefore)
    }
}

extension WritePathTests {
    /// Found by the random differential test: chown after create cleared the set-ID bits.
    func testCreateKeepsSetIDBits() throws {
        try fx.start()
        let fd = open(fx.inMount("tool"), O_WRONLY | O_CREAT | O_EXCL, 0o4755)
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        XCTAssertEqual(Disk.lstat(fx.inMount("tool")).map { $0.st_mode & 0o7777 }, 0o4755)
    }

    /// Found by the random differential test: a copy-up changed its directories' times
    /// (kernel overlayfs puts them back).
    func testCopyUpKeepsTheTimesOfItsDirectories() throws {
        try Disk.write(fx.inMain("a/b/f"), "f")
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
        for path in ["a/b/f", "a/b", "a", ""] { XCTAssertEqual(utimensat(AT_FDCWD, fx.inMain(path), &times, 0), 0) }
        try fx.start()
        XCTAssertEqual(chmod(fx.inMount("a/b/f"), 0o600), 0)
        try Disk.write(fx.inMount(".invalidate"), "\n")
        for path in ["a/b", "a"] {  // the root shows the substitution's own root
            XCTAssertEqual(Disk.lstat(fx.inMount(path))?.st_mtim.tv_sec, 1_600_000_000, "mtime of '\(path)'")
        }
    }
}

extension WritePathTests {
    func testCopyFileRangeCopiesAtOffsetsIntoTheSubstitution() throws {
        try Disk.write(fx.inMain("source"), "0123456789")
        try Disk.write(fx.inMain("target"), "abcdefghij")
        try fx.start()
        let input = open(fx.inMount("source"), O_RDONLY)
        let output = open(fx.inMount("target"), O_WRONLY)
        defer { close(input); close(output) }
        var from: Int64 = 2
        var to: Int64 = 5
        XCTAssertEqual(pb_copy_file_range(input, &from, output, &to, 4), 4, "errno \(errno)")
        XCTAssertEqual(try Disk.read(fx.inMount("target")), "abcde2345j")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("target")), "abcde2345j")
    }

    func testFsyncOfDirectoriesInEitherLayer() throws {
        try Disk.mkdir(fx.inMain("main-only"))
        try Disk.mkdir(fx.inSubstitution("patched"))
        try fx.start()
        for dir in ["main-only", "patched", ""] {
            let fd = open(fx.inMount(dir), O_RDONLY | O_DIRECTORY)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(fsync(fd), 0, "\(dir): errno \(errno)")
            close(fd)
        }
    }
}

extension WritePathTests {
    /// The number survives the kernel forgetting the node (memory pressure), and files inside
    /// a directory that is materialized by a rename keep theirs too.
    func testInodeNumbersSurviveForgettingAndMaterializing() throws {
        try Disk.write(fx.inMain("db"), "data")
        try Disk.mkdir(fx.inMain("dir"))
        try Disk.write(fx.inMain("dir/inside"), "main")
        try fx.start()
        let db = try XCTUnwrap(Disk.lstat(fx.inMount("db"))).st_ino
        let inside = try XCTUnwrap(Disk.lstat(fx.inMount("dir/inside"))).st_ino
        try Disk.write(fx.inMount("db"), "DATA")
        XCTAssertEqual(rename(fx.inMount("dir"), fx.inMount("moved")), 0)
        XCTAssertEqual(Disk.lstat(fx.inMount("moved/inside"))?.st_ino, inside, "after materializing")
        let nodesBefore = try fx.figure("cached_nodes")
        try eventually("the kernel forgets nodes") {
            try Handles.dropKernelCaches()
            return try fx.figure("cached_nodes") < nodesBefore
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("db"))?.st_ino, db, "after the kernel forgot the node")
        XCTAssertEqual(Disk.lstat(fx.inMount("moved/inside"))?.st_ino, inside)
    }
}
