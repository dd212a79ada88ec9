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
        XCTAssertEqual(overlay.place(of: d)?.parent, rootNodeID)
        XCTAssertEqual(overlay.place(of: d)?.name, Array("d".utf8))
        XCTAssertNil(overlay.place(of: rootNodeID))
        // an access time older than its change time, which relatime would update on a read
        for side in [Side.main, .patch] {
            var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, path(side, "d/sub"), &times, 0), 0)
        }
        let before = (accessTime(.main, "d/sub"), accessTime(.patch, "d/sub"))
        overlay.warmSubdirectory(Array("sub".utf8), of: d)
        XCTAssertEqual(accessTime(.main, "d/sub"), before.0)
        XCTAssertEqual(accessTime(.patch, "d/sub"), before.1)
        XCTAssertEqual(try Set(overlay.listDirectory(lookup(overlay, "d/sub").node).named.map { String(decoding: $0.name, as: UTF8.self) }),
                       [".", "..", "a", "b"])
    }

    func testWarmingADirectoryThatIsGoneDoesNothing() throws {
        try write(.main, "d/file", "f")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d").node
        overlay.warmSubdirectory(Array("missing".utf8), of: d)
        overlay.warmSubdirectory(Array("file".utf8), of: d)
        overlay.warmSubdirectory(Array("x".utf8), of: 987_654)
        XCTAssertEqual(try lookup(overlay, "d/file").attributes.st_size, 1)
    }
}
