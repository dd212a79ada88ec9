import Foundation
import XCTest

/// FUSE passthrough: open files are read and written by the kernel straight from the layers'
/// files. One kernel inode passes through to one file at a time, so a main-bundle file that
/// is open for reading and then opened for writing (a copy-up) becomes a new inode, while the
/// open reader keeps reading the main bundle's file, as with kernel overlayfs.
final class PassthroughTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    private func count(_ key: String) throws -> Int { Int(try fx.stats()[key] ?? "") ?? -1 }

    func testReadsAndWritesOfOpenFilesPassThrough() throws {
        try Disk.write(fx.inMain("main.txt"), "from the main bundle")
        try fx.start()
        XCTAssertEqual(try fx.stats()["passthrough"], "on")
        XCTAssertEqual(try Disk.read(fx.inMount("main.txt")), "from the main bundle")
        try Disk.write(fx.inMount("new.txt"), "written")
        XCTAssertEqual(try Disk.read(fx.inPatch("new.txt")), "written")
        XCTAssertEqual(try Disk.read(fx.inMount("new.txt")), "written")
        XCTAssertEqual(try count("passthrough_opens"), 3)
        XCTAssertEqual(try count("cached_opens"), 0)
    }

    func testWithoutPassthroughOpensArePageCached() throws {
        try Disk.write(fx.inMain("main.txt"), "from the main bundle")
        fx.environment = ["PROXYBUNDLE_NO_PASSTHROUGH=1"]
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount("main.txt")), "from the main bundle")
        XCTAssertEqual(try fx.stats()["passthrough"], "off")
        XCTAssertEqual(try count("passthrough_opens"), 0)
        XCTAssertEqual(try count("cached_opens"), 1)
    }

    /// Before the fix: the open for writing failed with EIO (the kernel refuses an open of an
    /// inode in passthrough that does not pass through to the same file).
    func testOpeningForWritingAFileOpenForReadingCopiesItUp() throws {
        try Disk.write(fx.inMain("doc.txt"), "main")
        try fx.start()
        let reader = open(fx.inMount("doc.txt"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        XCTAssertEqual(try Disk.readAll(reader), "main")
        let writer = open(fx.inMount("doc.txt"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(writer, 0, String(cString: strerror(errno)))
        XCTAssertEqual(write(writer, "+more", 5), 5)
        close(writer)
        XCTAssertEqual(try Disk.read(fx.inPatch("doc.txt")), "main+more")
        XCTAssertEqual(try Disk.read(fx.inMount("doc.txt")), "main+more", "a new open reads the copy")
        XCTAssertEqual(lseek(reader, 0, SEEK_SET), 0)
        XCTAssertEqual(try Disk.readAll(reader), "main", "the open reader keeps the main bundle's file")
        XCTAssertEqual(try count("stale_opens"), 1)
    }

    /// Writes and truncations by a user without CAP_FSETID clear set-user-ID and set-group-ID,
    /// as on kernel overlayfs, also when files pass through (the kernel clears them before
    /// writing). `FUSE_HANDLE_KILLPRIV_V2` (one GETXATTR per inode instead of one per write)
    /// would leave them set: the daemon never sees a passthrough write.
    func testWritesAndTruncationsByAnotherUserClearSetIDBits() throws {
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        let files = [fx.inMain("main-written"), fx.inMain("main-truncated"), fx.inPatch("patch-written"),
                     fx.inPatch("patch-truncated")]
        for path in files {
            try Disk.write(path, "data")
            XCTAssertEqual(chown(path, 65534, 65534), 0)
            XCTAssertEqual(chmod(path, 0o6777), 0)  // after chown, which clears the bits
        }
        try fx.start(["-o", "allow_other"])
        let m = fx.mountpoint
        let commands = "echo more >> \(m)/main-written && echo more >> \(m)/patch-written"
            + " && truncate -s 2 \(m)/main-truncated && truncate -s 2 \(m)/patch-truncated"
        let result = try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh",
                                                        "-c", commands], seconds: 10)
        XCTAssertEqual(result.status, 0, result.error)
        for name in ["main-written", "patch-written", "main-truncated", "patch-truncated"] {
            XCTAssertEqual(Disk.lstat(fx.inMount(name)).map { $0.st_mode & 0o7777 }, 0o777, name)
            XCTAssertEqual(Disk.lstat(fx.inPatch(name)).map { $0.st_mode & 0o7777 }, 0o777, name)
        }
    }
}
