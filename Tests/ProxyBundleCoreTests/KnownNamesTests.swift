@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A directory missed in often has its names read, and later misses there are answered from
/// them. What the layers gain behind the daemon's back then shows after an invalidation, like
/// every cached answer; what is made through the mount shows at once.
final class KnownNamesTests: OverlayTestCase {
    /// Looks up `count` names that neither layer has in `dir`.
    private func miss(_ overlay: Overlay, in dir: String, count: Int) throws {
        for index in 0..<count {
            assertErrno(ENOENT, try lookup(overlay, "\(dir)/missing\(index)"))
        }
    }

    /// Caching overlay over d (in both layers, with a name in each) after enough misses in d.
    private func overlayWithNamesRead() throws -> (Overlay, d: NodeID) {
        try write(.main, "d/low", "main")
        try write(.patch, "d/up", "patch")
        let overlay = try makeCachingOverlay()
        try miss(overlay, in: "d", count: KnownNames.missesBeforeReading)
        return (overlay, try lookup(overlay, "d").node)
    }

    func testMissesAfterTheNamesWereReadAreAnsweredFromThem() throws {
        let (overlay, _) = try overlayWithNamesRead()
        XCTAssertEqual(try lookup(overlay, "d/low").attributes.st_size, 4)
        XCTAssertEqual(try lookup(overlay, "d/up").attributes.st_size, 5)
        try write(.patch, "d/late", "dropped in")
        try write(.main, "d/later", "dropped in")
        // read before these were written: answered from the names (before: found on disk)
        assertErrno(ENOENT, try lookup(overlay, "d/late"))
        assertErrno(ENOENT, try lookup(overlay, "d/later"))
        _ = try overlay.invalidate()
        XCTAssertEqual(try lookup(overlay, "d/late").attributes.st_size, 10)
        XCTAssertEqual(try lookup(overlay, "d/later").attributes.st_size, 10)
    }

    func testFewerMissesReadNothing() throws {
        try write(.main, "d/low", "main")
        try write(.patch, "d/up", "patch")
        let overlay = try makeCachingOverlay()
        try miss(overlay, in: "d", count: KnownNames.missesBeforeReading - 1)
        try write(.patch, "d/late", "dropped in")
        XCTAssertEqual(try lookup(overlay, "d/late").attributes.st_size, 10)
    }

    func testWithoutLookupCachingNamesAreNeverRead() throws {
        try write(.main, "d/low", "main")
        try write(.patch, "d/up", "patch")
        let overlay = try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: patchRoot), writable: true,
                                  cachesLookups: false)
        try miss(overlay, in: "d", count: 2 * KnownNames.missesBeforeReading)
        try write(.patch, "d/late", "dropped in")
        XCTAssertEqual(try lookup(overlay, "d/late").attributes.st_size, 10)
    }

    /// Each new name is looked up again after the kernel forgot its node, so it is resolved
    /// in the directory rather than answered from the node table.
    func testNamesMadeThroughTheMountAreFound() throws {
        try write(.main, "e/moving", "moves")
        let (overlay, d) = try overlayWithNamesRead()
        let (file, fd) = try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("file"), in: d)
        if let fd { close(fd) }
        let (directory, _) = try overlay.create(Request(overlay, owner: me), .directory(mode: 0o755), named: n("directory"), in: d)
        let (link, _) = try overlay.create(Request(overlay, owner: me), .symlink(target: n("file")), named: n("symlink"), in: d)
        let low = try lookup(overlay, "d/low").node
        _ = try overlay.link(Request(overlay), low, as: n("hardlink"), in: d)
        let e = try lookup(overlay, "e").node
        try overlay.rename(Request(overlay), n("moving"), in: e, to: n("moved"), in: d, flags: 0)
        for node in [file.node, directory.node, link.node, low] { overlay.forget(node, count: 10) }
        for name in ["file", "directory", "symlink", "hardlink", "moved"] {
            XCTAssertNoThrow(try lookup(overlay, "d/\(name)"), name)
        }
    }
}
