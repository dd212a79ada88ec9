import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Reading a subdirectory ahead of a walk: it changes nothing in either layer (not even an
/// access time) and shrugs off a directory that is gone.
final class PrefetchTests: OverlayTestCase {
    private func accessTime(_ side: Side, _ relative: String) -> Int {
        var st = stat()
        guard lstat(path(side, relative), &st) == 0 else { return -1 }
        return st.st_atim.tv_sec * 1_000_000_000 + st.st_atim.tv_nsec
    }

    func testWarmingASubdirectoryChangesNothing() throws {
        try write(.main, "d/sub/a", "a")
        try write(.patch, "d/sub/b", "b")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d").node
        XCTAssertEqual(overlay.place(Request(overlay), of: d)?.parent, rootNodeID)
        XCTAssertEqual(overlay.place(Request(overlay), of: d)?.name, Array("d".utf8))
        XCTAssertNil(overlay.place(Request(overlay), of: rootNodeID))
        // an access time older than its change time, which relatime would update on a read
        for side in [Side.main, .patch] {
            var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, path(side, "d/sub"), &times, 0), 0)
        }
        let before = (accessTime(.main, "d/sub"), accessTime(.patch, "d/sub"))
        overlay.warmSubdirectory(Request(overlay), Array("sub".utf8), of: d)
        XCTAssertEqual(accessTime(.main, "d/sub"), before.0)
        XCTAssertEqual(accessTime(.patch, "d/sub"), before.1)
        XCTAssertEqual(try Set(overlay.listDirectory(Request(overlay), lookup(overlay, "d/sub").node).named.map { String(decoding: $0.name, as: UTF8.self) }),
                       [".", "..", "a", "b"])
    }

    func testWarmingADirectoryThatIsGoneDoesNothing() throws {
        try write(.main, "d/file", "f")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d").node
        overlay.warmSubdirectory(Request(overlay), Array("missing".utf8), of: d)
        overlay.warmSubdirectory(Request(overlay), Array("file".utf8), of: d)
        overlay.warmSubdirectory(Request(overlay), Array("x".utf8), of: 987_654)
        XCTAssertEqual(try lookup(overlay, "d/file").attributes.st_size, 1)
    }

    /// Drops the pages of the file at `relative` from the page cache (written back first).
    private func evict(_ side: Side, _ relative: String) throws {
        let fd = open(path(side, relative), O_RDONLY)
        guard fd >= 0 else { throw FixtureError("open \(relative)") }
        defer { close(fd) }
        XCTAssertEqual(fsync(fd), 0)
        XCTAssertEqual(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0)
    }

    func testReadingFilesAheadStartsOnlyOnRegularFilesNotCachedAndChangesNothing() throws {
        try write(.main, "d/main-file", String(repeating: "m", count: 100_000))
        try write(.patch, "d/patch-file", String(repeating: "p", count: 50_000))
        try write(.main, "d/shadowed", "main")
        try write(.patch, "d/shadowed", "patch")
        try mkdir(.main, "d/dir")
        try symlink(.main, "d/link", to: "main-file")
        XCTAssertEqual(mkfifo(path(.main, "d/fifo"), 0o644), 0)
        for file in ["d/main-file", "d/shadowed"] { try evict(.main, file) }
        for file in ["d/patch-file", "d/shadowed"] { try evict(.patch, file) }
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path(.main, "d/main-file"), &times, 0), 0)
        let before = accessTime(.main, "d/main-file")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d").node
        let listing = try overlay.listDirectory(Request(overlay), d)
        var outcomes: [String: DirectoryListing.ReadAhead] = [:]
        for (name, item) in listing.named {
            outcomes[String(decoding: name, as: UTF8.self)] = listing.readAhead(item, limit: 1 << 20)
        }
        XCTAssertEqual(outcomes.keys.sorted(), [".", "..", "dir", "fifo", "link", "main-file", "patch-file", "shadowed"])
        XCTAssertEqual(outcomes["main-file"], .started)
        XCTAssertEqual(outcomes["patch-file"], .started)
        XCTAssertEqual(outcomes["shadowed"], .started, "the substitution's file, listed from there")
        for other in [".", "..", "dir", "fifo", "link"] { XCTAssertEqual(outcomes[other], .skipped, other) }
        XCTAssertEqual(accessTime(.main, "d/main-file"), before)
        // read once through the overlay: in the page cache now, nothing more to ask
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/main-file").node).count, 100_000)
        guard let item = item(listing, "main-file") else { return XCTFail("main-file not listed") }
        XCTAssertEqual(listing.readAhead(item, limit: 1 << 20), .cached)
    }
}
