import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// An invalidation of the whole tree (nothing written to `.invalidate`) forgets exactly the
/// names that changed on disk since the daemon looked into their directories (inotify), and
/// keeps everything else cached; when that cannot be known, it forgets everything.
final class ExactInvalidationTests: OverlayTestCase {
    func hits(_ overlay: Overlay) -> UInt64 { overlay.cacheStatistics.hits }

    func testNothingChangedKeepsEverythingCached() throws {
        try write(.main, "d/a", "a")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "d/a")
        assertErrno(ENOENT, try lookup(overlay, "d/x"))
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        XCTAssertTrue(result.entries.isEmpty, "\(result.entries)")
        let before = hits(overlay)
        _ = try lookup(overlay, "d/a")
        assertErrno(ENOENT, try lookup(overlay, "d/x"))
        XCTAssertEqual(hits(overlay), before + 4, "d (twice), d/a and the absent d/x answered from the cache")
    }

    func testOnlyTheChangedNamesAreForgotten() throws {
        try write(.main, "d/a", "a")
        try write(.patch, "d/b", "b")
        let overlay = try makeCachingOverlay()
        let d = try lookup(overlay, "d").node
        _ = try lookup(overlay, "d/a")
        let b = try lookup(overlay, "d/b").node
        assertErrno(ENOENT, try lookup(overlay, "d/x"))
        try write(.main, "d/x", "new in main")
        try replaceOnDisk(.patch, "d/b", "b2")
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        XCTAssertTrue(touched(result, d, "x"), "\(result.entries)")
        XCTAssertTrue(touched(result, d, "b"))
        XCTAssertFalse(touched(result, d, "a"), "unchanged")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/x").node), "new in main")
        let newB = try lookup(overlay, "d/b").node
        XCTAssertNotEqual(newB, b, "another file: another node")
        XCTAssertEqual(try readContent(overlay, newB), "b2")
    }

    func testChangedContentInvalidatesTheNodeButKeepsItsName() throws {
        try write(.patch, "f", "one")
        let overlay = try makeCachingOverlay()
        let f = try lookup(overlay, "f").node
        try write(.patch, "f", "two, longer")  // in place: same inode
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        XCTAssertFalse(touched(result, rootNodeID, "f"), "the name still leads to the same file")
        XCTAssertTrue(result.nodes.contains(f), "its pages and attributes go")
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: f).st_size, 11)
    }

    func testWhiteoutAndOpaqueMarkerAddedOnDiskHideMainEntries() throws {
        try write(.main, "d/a", "a")
        try write(.main, "d/b", "b")
        try write(.main, "e/c", "c")
        try mkdir(.patch, "e")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "d/a")
        _ = try lookup(overlay, "e/c")
        try write(.patch, "d/.wh.a")
        try write(.patch, "e/.wh..wh..opq")
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        assertErrno(ENOENT, try lookup(overlay, "d/a"))
        XCTAssertNoThrow(try lookup(overlay, "d/b"))
        assertErrno(ENOENT, try lookup(overlay, "e/c"), "the opaque marker hides all of main's e")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "e").node)), [])
    }

    func testReplacedDirectoryIsForgottenWithEverythingBeneath() throws {
        try write(.patch, "d/sub/f", "old")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "d/sub/f")
        try rename(.patch, "d", "d.old")
        try write(.patch, "d/sub/f", "new")
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/sub/f").node), "new")
        try write(.patch, "d/sub/g", "later")
        _ = try overlay.invalidate()
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/sub/g").node), "later",
                       "the new directories are watched in turn")
    }

    func testDirectoryMadeThroughTheOverlayIsWatchedToo() throws {
        let overlay = try makeCachingOverlay()
        let d = try overlay.create(Request(overlay, owner: me), .directory(mode: 0o755), named: n("d"), in: rootNodeID).entry.node
        let made = try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("f"), in: d)
        if let fd = made.fd { close(fd) }
        try remove(.patch, "d/f")  // no lookup in d happened: d was never opened for one
        let result = try overlay.invalidate()
        XCTAssertTrue(touched(result, d, "f"), "\(result.entries)")
        assertErrno(ENOENT, try lookup(overlay, "d/f"))
    }

    func testChangesInTheMainBundleAreSeen() throws {
        try write(.main, "d/a", "a")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "d/a")
        try remove(.main, "d/a")
        let result = try overlay.invalidate()
        XCTAssertTrue(result.exact)
        assertErrno(ENOENT, try lookup(overlay, "d/a"))
    }

    func testTooManyChangesFallBackToForgettingEverything() throws {
        try mkdir(.patch, "d")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "d")
        assertErrno(ENOENT, try lookup(overlay, "d/x"))
        let limit = Int((try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 16384
        for index in 0...(limit / 2 + 1) {
            let fd = open(path(.patch, "d/n\(index)"), O_WRONLY | O_CREAT, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0)
            close(fd)
            unlink(path(.patch, "d/n\(index)"))
        }
        let result = try overlay.invalidate()
        XCTAssertFalse(result.exact, "the event queue overflowed")
        XCTAssertEqual(overlay.cacheStatistics.absentNames, 0, "everything forgotten")
        try write(.patch, "d/x", "x")
        let again = try overlay.invalidate()
        XCTAssertTrue(again.exact, "watching starts over")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/x").node), "x")
    }
}
