import Dispatch
import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Node IDs (the kernel's handles) and inode numbers (what users see).
final class NodeTableTests: OverlayTestCase {
    // MARK: node IDs

    func testFreshOverlayHoldsOnlyTheRoot() throws {
        let overlay = try makeOverlay()
        XCTAssertEqual(rootNodeID, 1)
        XCTAssertEqual(overlay.nodeCount, 1)
        XCTAssertEqual(fileType(try overlay.attributes(Request(overlay), of: rootNodeID)), S_IFDIR)
    }

    func testRepeatedLookupsReuseTheNode() throws {
        try write(.main, "a", "a")
        try write(.patch, "b", "b")
        let overlay = try makeOverlay()
        let a1 = try lookup(overlay, "a")
        let a2 = try lookup(overlay, "a")
        let a3 = try lookup(overlay, "a")
        XCTAssertEqual(a1.node, a2.node)
        XCTAssertEqual(a1.node, a3.node)
        XCTAssertNotEqual(a1.node, rootNodeID)
        XCTAssertEqual(overlay.nodeCount, 2)
        let b = try lookup(overlay, "b")
        XCTAssertNotEqual(b.node, a1.node)
        XCTAssertEqual(overlay.nodeCount, 3)
    }

    func testSameNameInDifferentDirectoriesAreDifferentNodes() throws {
        try write(.main, "x", "root")
        try write(.main, "d/x", "in d")
        let overlay = try makeOverlay()
        let rootX = try lookup(overlay, "x")
        let dX = try lookup(overlay, "d/x")
        XCTAssertNotEqual(rootX.node, dX.node)
        XCTAssertEqual(try readContent(overlay, rootX.node), "root")
        XCTAssertEqual(try readContent(overlay, dX.node), "in d")
        XCTAssertEqual(overlay.nodeCount, 4)
    }

    func testForgetCountsDownLookups() throws {
        try write(.main, "a", "a")
        let overlay = try makeOverlay()
        let first = try lookup(overlay, "a")
        _ = try lookup(overlay, "a")
        _ = try lookup(overlay, "a")
        XCTAssertEqual(overlay.nodeCount, 2)
        overlay.forget(first.node, count: 2)
        XCTAssertEqual(overlay.nodeCount, 2, "one lookup is still outstanding")
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: first.node).st_ino, try lstatOf(.main, "a").st_ino)
        overlay.forget(first.node, count: 1)
        XCTAssertEqual(overlay.nodeCount, 1, "the kernel holds only the root")
        // known still, for a file handle: "." gives it back, with one reference
        XCTAssertEqual(try overlay.lookupItself(Request(overlay), first.node).node, first.node)
        XCTAssertEqual(overlay.nodeCount, 2)
        XCTAssertEqual(try overlay.lookupParent(Request(overlay), of: first.node).node, rootNodeID)
    }

    /// Nodes the kernel forgot go once their files do: removed through the overlay at once,
    /// removed behind its back when their name is next found missing, and the nodes beneath a
    /// directory gone so at the next full invalidation.
    func testForgottenNodesGoWithTheirFiles() throws {
        try write(.main, "dir/f", "f")
        try write(.patch, "g", "g")
        let overlay = try makeCachingOverlay()
        let dir = try lookup(overlay, "dir")
        let f = try overlay.lookup(Request(overlay), parent: dir.node, name: n("f"))
        let g = try lookup(overlay, "g")
        for node in [dir.node, f.node, g.node] { overlay.forget(node, count: 1) }
        XCTAssertEqual(overlay.cacheStatistics.forgottenNodes, 3)
        try overlay.unlink(Request(overlay), n("g"), in: rootNodeID)
        XCTAssertEqual(overlay.cacheStatistics.forgottenNodes, 2, "g was removed")
        XCTAssertEqual(Glibc.unlink(path(.main, "dir/f")), 0)
        XCTAssertEqual(Glibc.rmdir(path(.main, "dir")), 0)
        _ = try overlay.invalidate()
        XCTAssertEqual(overlay.cacheStatistics.forgottenNodes, 2, "not looked at since")
        assertErrno(ENOENT, try lookup(overlay, "dir"))
        XCTAssertEqual(overlay.cacheStatistics.forgottenNodes, 1, "dir was found missing")
        assertErrno(ESTALE, try overlay.lookupItself(Request(overlay), f.node))
        _ = try overlay.invalidate()
        XCTAssertEqual(overlay.cacheStatistics.forgottenNodes, 0, "f's directory is gone")
        XCTAssertEqual(overlay.nodeCount, 1)
    }

    func testForgettingMoreThanLookedUpRemovesTheNode() throws {
        try write(.main, "a", "a")
        let overlay = try makeOverlay()
        let a = try lookup(overlay, "a")
        overlay.forget(a.node, count: 1000)
        XCTAssertEqual(overlay.nodeCount, 1)
        overlay.forget(a.node, count: 1)  // already gone: ignored
        XCTAssertEqual(overlay.nodeCount, 1)
    }

    /// A file keeps its node ID after the kernel forgot it; another file at its name later
    /// gets a new one, and the old ID answers ESTALE.
    func testNodeIDsAreNeverReusedForAnotherFile() throws {
        try write(.main, "a", "a")
        let overlay = try makeOverlay()
        let first = try lookup(overlay, "a")
        overlay.forget(first.node, count: 1)
        let again = try lookup(overlay, "a")
        XCTAssertEqual(again.node, first.node, "the same file")
        overlay.forget(again.node, count: 1)
        // another file (made before the old one goes, so its inode number differs)
        try write(.main, "a.new", "another")
        XCTAssertEqual(Glibc.rename(path(.main, "a.new"), path(.main, "a")), 0)
        _ = try overlay.invalidate()
        let second = try lookup(overlay, "a")
        XCTAssertGreaterThan(second.node, first.node)
        XCTAssertEqual(overlay.nodeCount, 2)
        assertErrno(ESTALE, try overlay.lookupItself(Request(overlay), first.node))
        XCTAssertEqual(try readContent(overlay, second.node), "another")
    }

    func testForgettingTheRootOrAnUnknownNodeChangesNothing() throws {
        try write(.main, "a", "a")
        let overlay = try makeOverlay()
        _ = try lookup(overlay, "a")
        overlay.forget(rootNodeID, count: 100)
        overlay.forget(424_242, count: 1)
        XCTAssertEqual(overlay.nodeCount, 2)
        XCTAssertEqual(fileType(try overlay.attributes(Request(overlay), of: rootNodeID)), S_IFDIR)
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["a"])
    }

    func testNodesOfADeepPathAndForgettingThemAll() throws {
        try write(.main, "a/b/c/d", "deep")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "a/b/c/d")
        XCTAssertEqual(try readContent(overlay, d.node), "deep")
        XCTAssertEqual(overlay.nodeCount, 5)
        let a = try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("a"))
        let b = try overlay.lookup(Request(overlay), parent: a.node, name: n("b"))
        let c = try overlay.lookup(Request(overlay), parent: b.node, name: n("c"))
        XCTAssertEqual(overlay.nodeCount, 5)
        // the kernel forgets children before parents
        overlay.forget(d.node, count: 1)
        overlay.forget(c.node, count: 2)
        overlay.forget(b.node, count: 2)
        overlay.forget(a.node, count: 2)
        XCTAssertEqual(overlay.nodeCount, 1)
    }

    func testConcurrentLookupsAgreeOnOneNode() throws {
        for i in 0..<8 { try write(.main, "f\(i)", "\(i)") }
        let overlay = try makeOverlay()
        let results = Locked<[Int: Set<NodeID>]>([:], rank: .local)
        let failures = Locked(0, rank: .local)
        DispatchQueue.concurrentPerform(iterations: 64) { iteration in
            let i = iteration % 8
            do {
                let entry = try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("f\(i)"))
                results.withLock { _ = $0[i, default: []].insert(entry.node) }
            } catch {
                failures.withLock { $0 += 1 }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0)
        let ids = results.withLock { $0 }
        XCTAssertEqual(ids.count, 8)
        for (i, set) in ids { XCTAssertEqual(set.count, 1, "f\(i) got several nodes: \(set)") }
        XCTAssertEqual(overlay.nodeCount, 9)
        for set in ids.values { overlay.forget(set.first!, count: 8) }
        XCTAssertEqual(overlay.nodeCount, 1)
    }

    // MARK: inode numbers

    func testLayersOnOneFileSystemKeepTheirInodeNumbers() throws {
        try write(.main, "m", "m")
        try write(.patch, "p", "p")
        try mkdir(.main, "d")
        try mkdir(.patch, "d")
        let overlay = try makeOverlay()
        XCTAssertEqual(try lookup(overlay, "m").attributes.st_ino, try lstatOf(.main, "m").st_ino)
        XCTAssertEqual(try lookup(overlay, "p").attributes.st_ino, try lstatOf(.patch, "p").st_ino)
        XCTAssertEqual(try lookup(overlay, "d").attributes.st_ino, try lstatOf(.patch, "d").st_ino)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: rootNodeID).st_ino, try lstatOf(.patch, "").st_ino)
    }

    func testHardLinksInMainShareTheInodeNumber() throws {
        try write(.main, "one", "shared content")
        try hardLink(.main, "one", "two")
        try hardLink(.main, "one", "sub/three")
        let overlay = try makeOverlay()
        let one = try lookup(overlay, "one")
        let two = try lookup(overlay, "two")
        let three = try lookup(overlay, "sub/three")
        XCTAssertNotEqual(one.node, two.node, "hard links are different names, so different nodes")
        XCTAssertEqual(one.attributes.st_ino, two.attributes.st_ino)
        XCTAssertEqual(one.attributes.st_ino, three.attributes.st_ino)
        XCTAssertEqual(one.attributes.st_nlink, 3)
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        XCTAssertEqual(item(listing, "one")?.inode, item(listing, "two")?.inode)
        XCTAssertEqual(item(listing, "one")?.inode, UInt64(one.attributes.st_ino))
    }

    /// Copying up one name of a main-bundle file with several gives that name a file of its
    /// own, which must show a number of its own (kernel overlayfs keeps the lower number only
    /// for a file with one link). Before the fix it kept the number the other names still show.
    func testCopyingUpOneNameOfAHardLinkedFileGivesItANumberOfItsOwn() throws {
        try write(.main, "one", "shared content")
        try hardLink(.main, "one", "two")
        try write(.main, "single", "one link")
        let overlay = try makeCachingOverlay()
        let one = try lookup(overlay, "one")
        let single = try lookup(overlay, "single")
        var changes = Overlay.AttributeChanges()
        changes.mode = 0o600
        _ = try overlay.setAttributes(Request(overlay), one.node, changes, openFile: nil)
        _ = try overlay.setAttributes(Request(overlay), single.node, changes, openFile: nil)
        XCTAssertNotEqual(try overlay.attributes(Request(overlay), of: one.node).st_ino, try lookup(overlay, "two").attributes.st_ino)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: one.node).st_ino, try lstatOf(.patch, "one").st_ino)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: single.node).st_ino, single.attributes.st_ino, "one link: the number stays")
    }

    func testHardLinksInSubstitutionShareTheInodeNumber() throws {
        try write(.patch, "one", "shared content")
        try hardLink(.patch, "one", "two")
        try write(.main, "two", "main two, shadowed")
        let overlay = try makeOverlay()
        let one = try lookup(overlay, "one")
        let two = try lookup(overlay, "two")
        XCTAssertEqual(one.attributes.st_ino, two.attributes.st_ino)
        XCTAssertEqual(one.attributes.st_ino, try lstatOf(.patch, "one").st_ino)
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        XCTAssertEqual(item(listing, "one")?.inode, item(listing, "two")?.inode)
    }

    func testInodeNumbersAreDistinctAcrossLayers() throws {
        for i in 0..<20 { try write(.main, "m\(i)") }
        for i in 0..<20 { try write(.patch, "p\(i)") }
        let overlay = try makeOverlay()
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        let inodes = listing.named.dropFirst(2).filter { ControlFile(name: $0.name, in: rootNodeID) == nil }.map(\.item.inode)
        XCTAssertEqual(inodes.count, 40)
        XCTAssertEqual(Set(inodes).count, 40)
    }

    /// With the substitution on another file system (tmpfs), its numbers carry the top bit.
    func testSubstitutionOnAnotherFileSystemIsTaggedWithTheTopBit() throws {
        let shm = try makeTemporaryDirectory("patch-shm", under: "/dev/shm")
        var mainStat = stat(), shmStat = stat()
        XCTAssertEqual(lstat(mainRoot, &mainStat), 0)
        XCTAssertEqual(lstat(shm, &shmStat), 0)
        try XCTSkipIf(mainStat.st_dev == shmStat.st_dev, "/dev/shm is on the same file system as /tmp")
        patchRoot = shm
        try write(.main, "m", "m")
        try write(.patch, "p", "p")
        try write(.main, "both", "main")
        try write(.patch, "both", "patch")
        try write(.main, "d/x", "x")
        try mkdir(.patch, "d")
        let overlay = try makeOverlay()
        let top: ino_t = 1 << 63
        let m = try lookup(overlay, "m")
        let p = try lookup(overlay, "p")
        let both = try lookup(overlay, "both")
        let d = try lookup(overlay, "d")
        XCTAssertEqual(m.attributes.st_ino, try lstatOf(.main, "m").st_ino)
        XCTAssertEqual(p.attributes.st_ino, try lstatOf(.patch, "p").st_ino | top)
        XCTAssertEqual(both.attributes.st_ino, try lstatOf(.patch, "both").st_ino | top)
        XCTAssertEqual(d.attributes.st_ino, try lstatOf(.patch, "d").st_ino | top)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: p.node).st_ino, p.attributes.st_ino)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: rootNodeID).st_ino, try lstatOf(.patch, "").st_ino | top)
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        for name in ["m", "p", "both", "d"] {
            XCTAssertEqual(item(listing, name)?.inode, UInt64(try lookup(overlay, name).attributes.st_ino), name)
        }
        XCTAssertEqual(listing.items[0].inode, UInt64(try lstatOf(.patch, "").st_ino | top))
        XCTAssertEqual(try readContent(overlay, both.node), "patch")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "d/x").node), "x")
    }
}
