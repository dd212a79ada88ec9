import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Merged directory listings: each visible name once, "." and ".." first, types and inodes.
final class ListingTests: OverlayTestCase {
    func testMergedRootListsEveryVisibleNameOnceAfterDotAndDotDot() throws {
        try write(.main, "only-main", "m")
        try write(.main, "both", "mb")
        try mkdir(.main, "dir-both")
        try write(.patch, "only-patch", "p")
        try write(.patch, "both", "pb")
        try mkdir(.patch, "dir-both")
        try symlink(.patch, "link", to: "both")
        let overlay = try makeOverlay()
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        let all = names(listing)
        XCTAssertEqual(Array(all.prefix(2)), [".", ".."])
        XCTAssertEqual(all.count, 7)
        XCTAssertEqual(Array(all.dropFirst(2)).sorted(), ["both", "dir-both", "link", "only-main", "only-patch"])
        XCTAssertEqual(Set(all).count, all.count, "a name listed twice: \(all)")
        XCTAssertEqual(listing.node, rootNodeID)
    }

    func testListingTypesFollowTheServingLayer() throws {
        try write(.main, "file", "f")
        try mkdir(.main, "dir")
        try symlink(.main, "link", to: "file")
        try write(.main, "becomes-dir", "main file")
        try mkdir(.patch, "becomes-dir")
        try mkdir(.main, "becomes-file")
        try write(.patch, "becomes-file", "patch file")
        try makeCharacterDevice(.main, "null", major: 1, minor: 3)
        let overlay = try makeOverlay()
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        XCTAssertEqual(item(listing, ".")?.type, UInt8(DT_DIR))
        XCTAssertEqual(item(listing, "..")?.type, UInt8(DT_DIR))
        XCTAssertEqual(item(listing, "file")?.type, UInt8(DT_REG))
        XCTAssertEqual(item(listing, "dir")?.type, UInt8(DT_DIR))
        XCTAssertEqual(item(listing, "link")?.type, UInt8(DT_LNK))
        XCTAssertEqual(item(listing, "becomes-dir")?.type, UInt8(DT_DIR))
        XCTAssertEqual(item(listing, "becomes-file")?.type, UInt8(DT_REG))
        XCTAssertEqual(item(listing, "null")?.type, UInt8(DT_CHR), "a device other than 0/0 is not a whiteout")
        XCTAssertEqual(entryNames(listing), ["becomes-dir", "becomes-file", "dir", "file", "link", "null"])
    }

    func testListingInodesMatchLookupInodes() throws {
        try write(.main, "only-main", "m")
        try write(.main, "both", "mb")
        try write(.patch, "both", "pb")
        try write(.main, "d/x", "x")
        try write(.patch, "d/y", "y")
        try symlink(.patch, "link", to: "nowhere")
        let overlay = try makeOverlay()
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        for (name, item) in listing.named where name != [0x2E] && name != [0x2E, 0x2E] {
            let entry = try overlay.lookup(Request(overlay), parent: rootNodeID, name: name)
            XCTAssertEqual(item.inode, UInt64(entry.attributes.st_ino), String(decoding: name, as: UTF8.self))
        }
        XCTAssertEqual(item(listing, "both")?.inode, UInt64(try lstatOf(.patch, "both").st_ino))
        XCTAssertEqual(item(listing, "only-main")?.inode, UInt64(try lstatOf(.main, "only-main").st_ino))
        XCTAssertEqual(item(listing, "d")?.inode, UInt64(try lstatOf(.patch, "d").st_ino))
    }

    func testDotIsTheDirectoryAndDotDotItsParent() throws {
        try write(.main, "a/b/file", "f")
        try mkdir(.patch, "a")
        let overlay = try makeOverlay()
        let rootListing = try overlay.listDirectory(Request(overlay), rootNodeID)
        let rootIno = UInt64(try lstatOf(.patch, "").st_ino)
        XCTAssertEqual(rootListing.items[0].inode, rootIno)
        XCTAssertEqual(rootListing.items[1].inode, rootIno, "the root's .. is itself")

        let a = try lookup(overlay, "a")
        let aListing = try overlay.listDirectory(Request(overlay), a.node)
        XCTAssertEqual(names(aListing), [".", "..", "b"])
        XCTAssertEqual(aListing.items[0].inode, UInt64(try lstatOf(.patch, "a").st_ino))
        XCTAssertEqual(aListing.items[1].inode, rootIno)

        let b = try lookup(overlay, "a/b")
        let bListing = try overlay.listDirectory(Request(overlay), b.node)
        XCTAssertEqual(names(bListing), [".", "..", "file"])
        XCTAssertEqual(bListing.items[0].inode, UInt64(try lstatOf(.main, "a/b").st_ino))
        XCTAssertEqual(bListing.items[1].inode, UInt64(try lstatOf(.patch, "a").st_ino))
    }

    func testDirectoryOnlyInMain() throws {
        try write(.main, "res/one", "1")
        try write(.main, "res/two", "2")
        try mkdir(.main, "res/sub")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        let listing = try overlay.listDirectory(Request(overlay), res.node)
        XCTAssertEqual(Array(names(listing).prefix(2)), [".", ".."])
        XCTAssertEqual(entryNames(listing), ["one", "sub", "two"])
    }

    func testDirectoryOnlyInSubstitution() throws {
        try write(.patch, "added/one", "1")
        try symlink(.patch, "added/link", to: "one")
        try write(.main, "one", "root one in main")
        let overlay = try makeOverlay()
        let added = try lookup(overlay, "added")
        let listing = try overlay.listDirectory(Request(overlay), added.node)
        XCTAssertEqual(Array(names(listing).prefix(2)), [".", ".."])
        XCTAssertEqual(entryNames(listing), ["link", "one"])
    }

    func testEmptyDirectoryListsOnlyDotAndDotDot() throws {
        try mkdir(.main, "empty-main")
        try mkdir(.patch, "empty-patch")
        try mkdir(.main, "empty-both")
        try mkdir(.patch, "empty-both")
        let overlay = try makeOverlay()
        for name in ["empty-main", "empty-patch", "empty-both"] {
            let dir = try lookup(overlay, name)
            XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), dir.node)), [".", ".."], name)
        }
    }

    func testEmptyLayersListOnlyDotAndDotDot() throws {
        let overlay = try makeOverlay()
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", ".."])
    }

    func testMergedSubdirectoryListing() throws {
        try write(.main, "res/a", "ma")
        try write(.main, "res/b", "mb")
        try write(.patch, "res/b", "pb")
        try write(.patch, "res/c", "pc")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        let listing = try overlay.listDirectory(Request(overlay), res.node)
        XCTAssertEqual(Array(names(listing).prefix(2)), [".", ".."])
        XCTAssertEqual(names(listing).count, 5)
        XCTAssertEqual(entryNames(listing), ["a", "b", "c"])
        XCTAssertEqual(item(listing, "b")?.inode, UInt64(try lstatOf(.patch, "res/b").st_ino))
    }

    func testLargeMergedListingHasNoDuplicates() throws {
        for i in 0..<300 { try write(.main, "many/m\(i)") }
        for i in 150..<450 { try write(.patch, "many/m\(i)") }
        let overlay = try makeOverlay()
        let many = try lookup(overlay, "many")
        let listing = try overlay.listDirectory(Request(overlay), many.node)
        let all = names(listing)
        XCTAssertEqual(all.count, 452)
        XCTAssertEqual(Set(all).count, 452)
        XCTAssertEqual(Set(entryNames(listing)), Set((0..<450).map { "m\($0)" }))
        for i in [0, 149] {
            XCTAssertEqual(item(listing, "m\(i)")?.inode, UInt64(try lstatOf(.main, "many/m\(i)").st_ino))
        }
        for i in [150, 299, 449] {
            XCTAssertEqual(item(listing, "m\(i)")?.inode, UInt64(try lstatOf(.patch, "many/m\(i)").st_ino))
        }
    }

    func testListingAFileIsNotADirectory() throws {
        try write(.main, "file", "f")
        let overlay = try makeOverlay()
        let file = try lookup(overlay, "file")
        assertErrno(ENOTDIR, try overlay.listDirectory(Request(overlay), file.node))
    }

    /// A directory the kernel forgot is still known by its node ID (a file handle may bring
    /// it back); one never known, or removed, is stale.
    func testListingAnUnknownOrRemovedNodeIsStale() throws {
        try mkdir(.main, "dir")
        try mkdir(.patch, "gone")
        let overlay = try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: patchRoot), writable: true)
        let dir = try lookup(overlay, "dir")
        let gone = try lookup(overlay, "gone")
        overlay.forget(dir.node, count: 1)
        XCTAssertNoThrow(try overlay.listDirectory(Request(overlay), dir.node))
        assertErrno(ESTALE, try overlay.listDirectory(Request(overlay), 987_654))
        try overlay.removeDirectory(Request(overlay), n("gone"), in: rootNodeID)
        overlay.forget(gone.node, count: 1)
        assertErrno(ESTALE, try overlay.listDirectory(Request(overlay), gone.node))
    }

    func testListingIsASnapshot() throws {
        try write(.main, "dir/a", "a")
        let overlay = try makeOverlay()
        let dir = try lookup(overlay, "dir")
        let listing = try overlay.listDirectory(Request(overlay), dir.node)
        try write(.patch, "dir/b", "b")
        XCTAssertEqual(entryNames(listing), ["a"], "a listing taken at opendir does not change")
        _ = try overlay.invalidate()
        let again = try overlay.listDirectory(Request(overlay), try lookup(overlay, "dir").node)
        XCTAssertEqual(entryNames(again), ["a", "b"])
    }
}
