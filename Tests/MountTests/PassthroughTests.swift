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

    private func count(_ key: String) throws -> Int { try fx.figure(key) }

    func testReadsAndWritesOfOpenFilesPassThrough() throws {
        try Disk.write(fx.inMain("main.txt"), "from the main bundle")
        try fx.start()
        XCTAssertEqual(try fx.stats()["passthrough"], "on")
        XCTAssertEqual(try Disk.read(fx.inMount("main.txt")), "from the main bundle")
        try Disk.write(fx.inMount("new.txt"), "written")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new.txt")), "written")
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
        XCTAssertEqual(try Disk.read(fx.inSubstitution("doc.txt")), "main+more")
        XCTAssertEqual(try Disk.read(fx.inMount("doc.txt")), "main+more", "a new open reads the copy")
        XCTAssertEqual(lseek(reader, 0, SEEK_SET), 0)
        XCTAssertEqual(try Disk.readAll(reader), "main", "the open reader keeps the main bundle's file")
        XCTAssertEqual(try count("stale_opens"), 1)
    }
}
