import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The lookup cache: changes made on disk behind the overlay's back appear only after an
/// invalidation; changes made through the overlay keep the cache right at once. Also the
/// control files and the swap of the substitution directory.
final class CacheTests: OverlayTestCase {
    // MARK: changes on disk appear after an invalidation

    func testMissingNameStaysMissingUntilInvalidation() throws {
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "late"))
        try write(.main, "late", "arrived")
        assertErrno(ENOENT, try lookup(overlay, "late"), "the negative entry answers until invalidation")
        let result = try overlay.invalidate()
        XCTAssertTrue(touched(result, rootNodeID, "late"), "the negative entry is reported for the kernel")
        let entry = try lookup(overlay, "late")
        XCTAssertEqual(entry.attributes.st_ino, try lstatOf(.main, "late").st_ino)
        XCTAssertEqual(try readContent(overlay, entry.node), "arrived")
    }

    func testFileReplacedOnDiskGetsNewNodeAndOldNodeIsStale() throws {
        try write(.patch, "a", "old")
        let overlay = try makeCachingOverlay()
        let old = try lookup(overlay, "a")
        try replaceOnDisk(.patch, "a", "new content")
        let result = try overlay.invalidate()
        XCTAssertTrue(touched(result, rootNodeID, "a"))
        XCTAssertFalse(result.nodes.contains(old.node), "a file not open goes away with its entry")
        XCTAssertFalse(result.swappedSubstitution)
        let new = try lookup(overlay, "a")
        XCTAssertNotEqual(new.node, old.node)
        XCTAssertEqual(new.attributes.st_ino, try lstatOf(.patch, "a").st_ino)
        XCTAssertEqual(try readContent(overlay, new.node), "new content")
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: old.node))
    }

    func testOldNodeOfReplacedMainFileIsStaleBeforeTheNameIsLookedUpAgain() throws {
        try write(.main, "a", "one")
        let overlay = try makeCachingOverlay()
        let old = try lookup(overlay, "a")
        try replaceOnDisk(.main, "a", "two")
        _ = try overlay.invalidate()
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: old.node))
        assertErrno(ESTALE, try overlay.openFile(Request(overlay), old.node, flags: O_RDONLY))
        let new = try lookup(overlay, "a")
        XCTAssertNotEqual(new.node, old.node)
        XCTAssertEqual(try readContent(overlay, new.node), "two")
    }

    func testMainFileRewrittenInPlaceKeepsItsNode() throws {
        try write(.main, "a", "one")
        let overlay = try makeCachingOverlay()
        let before = try lookup(overlay, "a")
        try write(.main, "a", "three")
        _ = try overlay.invalidate()
        let after = try lookup(overlay, "a")
        XCTAssertEqual(after.node, before.node, "same inode: same node")
        XCTAssertEqual(after.attributes.st_size, 5)
        XCTAssertEqual(try readContent(overlay, before.node), "three")
    }

    func testFileBecomingDirectoryGetsNewNode() throws {
        try write(.main, "x", "file")
        let overlay = try makeCachingOverlay()
        let old = try lookup(overlay, "x")
        try remove(.main, "x")
        try write(.main, "x/inner", "in")
        _ = try overlay.invalidate()
        let new = try lookup(overlay, "x")
        XCTAssertNotEqual(new.node, old.node)
        XCTAssertEqual(fileType(new.attributes), S_IFDIR)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "x/inner").node), "in")
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: old.node))
    }

    func testDirectoryBecomingFileGetsNewNodeAndItsChildrenAreStale() throws {
        try write(.main, "d/inner", "in")
        let overlay = try makeCachingOverlay()
        let dir = try lookup(overlay, "d")
        let inner = try lookup(overlay, "d/inner")
        try remove(.main, "d")
        try write(.main, "d", "now a file")
        _ = try overlay.invalidate()
        let new = try lookup(overlay, "d")
        XCTAssertNotEqual(new.node, dir.node)
        XCTAssertEqual(fileType(new.attributes), S_IFREG)
        assertErrno(ESTALE, try overlay.listDirectory(Request(overlay), dir.node))
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: inner.node))
    }

    func testDirectoryBecomingMergedKeepsItsNodeAndListsBothLayers() throws {
        try write(.main, "d/m", "main")
        let overlay = try makeCachingOverlay()
        let dir = try lookup(overlay, "d")
        try write(.patch, "d/p", "patch")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), dir.node)), ["m"], "still main-only until invalidation")
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: dir.node, name: n("p")))
        _ = try overlay.invalidate()
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), dir.node)), ["m", "p"])
        XCTAssertEqual(try lookup(overlay, "d").node, dir.node)
        let p = try overlay.lookup(Request(overlay), parent: dir.node, name: n("p"))
        XCTAssertEqual(p.attributes.st_ino, try lstatOf(.patch, "d/p").st_ino)
    }

    func testWhiteoutAddedOnDiskHidesMainFileAfterInvalidation() throws {
        try write(.main, "a", "main")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        try write(.patch, ".wh.a")
        XCTAssertEqual(try lookup(overlay, "a").node, a.node, "cached until invalidation")
        _ = try overlay.invalidate()
        assertErrno(ENOENT, try lookup(overlay, "a"))
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: a.node))
    }

    func testWhiteoutRemovedOnDiskShowsMainFileAfterInvalidation() throws {
        try write(.main, "a", "main")
        try write(.patch, ".wh.a")
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "a"))
        try remove(.patch, ".wh.a")
        assertErrno(ENOENT, try lookup(overlay, "a"), "the negative entry answers until invalidation")
        _ = try overlay.invalidate()
        XCTAssertEqual(try lookup(overlay, "a").attributes.st_ino, try lstatOf(.main, "a").st_ino)
    }

    func testOpaqueMarkerAddedOnDiskHidesMainEntriesAfterInvalidation() throws {
        try write(.main, "d/m", "main")
        try write(.patch, "d/p", "patch")
        let overlay = try makeCachingOverlay()
        let dir = try lookup(overlay, "d")
        _ = try lookup(overlay, "d/m")
        try write(.patch, "d/.wh..wh..opq")
        XCTAssertNoThrow(try lookup(overlay, "d/m"), "cached until invalidation")
        _ = try overlay.invalidate()
        XCTAssertEqual(try lookup(overlay, "d").node, dir.node)
        assertErrno(ENOENT, try lookup(overlay, "d/m"))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), dir.node)), ["p"])
    }

    func testOpaqueMarkerAddedAtSubstitutionRootHidesMainAfterInvalidation() throws {
        try write(.main, "m", "main")
        try write(.patch, "p", "patch")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "m")
        try write(.patch, ".wh..wh..opq")
        _ = try overlay.invalidate()
        assertErrno(ENOENT, try lookup(overlay, "m"))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["p"])
    }

    // MARK: partial invalidation

    func testSubtreeInvalidationShowsChangesInsideOnly() throws {
        try mkdir(.main, "d1")
        try mkdir(.main, "d2")
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "d1/x"))
        assertErrno(ENOENT, try lookup(overlay, "d2/y"))
        assertErrno(ENOENT, try lookup(overlay, "z"))
        try write(.main, "d1/x", "x")
        try write(.main, "d2/y", "y")
        try write(.main, "z", "z")
        _ = try overlay.invalidate(subtree: n("d1"))
        XCTAssertEqual(try lookup(overlay, "d1/x").attributes.st_ino, try lstatOf(.main, "d1/x").st_ino)
        assertErrno(ENOENT, try lookup(overlay, "d2/y"), "outside the subtree: still cached")
        assertErrno(ENOENT, try lookup(overlay, "z"), "outside the subtree: still cached")
        _ = try overlay.invalidate()
        XCTAssertNoThrow(try lookup(overlay, "d2/y"))
        XCTAssertNoThrow(try lookup(overlay, "z"))
    }

    func testSubtreeInvalidationReportsOnlyWhatIsBeneathIt() throws {
        try mkdir(.main, "d1")
        try mkdir(.main, "d2")
        try write(.main, "d1/f", "f")
        let overlay = try makeCachingOverlay()
        let d1 = try lookup(overlay, "d1")
        let d2 = try lookup(overlay, "d2")
        let f = try lookup(overlay, "d1/f")
        assertErrno(ENOENT, try lookup(overlay, "d1/x"))
        assertErrno(ENOENT, try lookup(overlay, "d2/y"))
        let result = try overlay.invalidate(subtree: n("d1"))
        XCTAssertTrue(touched(result, rootNodeID, "d1"))
        XCTAssertTrue(touched(result, d1.node, "f"))
        XCTAssertTrue(touched(result, d1.node, "x"))
        XCTAssertFalse(touched(result, d2.node, "y"))
        XCTAssertFalse(touched(result, rootNodeID, "d2"))
        XCTAssertEqual(Set(result.nodes), [rootNodeID, d1.node], "directories, not the closed file f (\(f.node))")
    }

    func testSubtreeInvalidationOfDeeperPathLeavesSiblingsCached() throws {
        try mkdir(.main, "d1/sub")
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "d1/sub/f"))
        assertErrno(ENOENT, try lookup(overlay, "d1/g"))
        try write(.main, "d1/sub/f", "f")
        try write(.main, "d1/g", "g")
        _ = try overlay.invalidate(subtree: n("/d1/./sub/"))
        XCTAssertNoThrow(try lookup(overlay, "d1/sub/f"))
        assertErrno(ENOENT, try lookup(overlay, "d1/g"), "a sibling of the path is not beneath it")
    }

    func testSubtreeInvalidationOfNameCachedAsAbsent() throws {
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "new"))
        assertErrno(ENOENT, try lookup(overlay, "other"))
        try write(.main, "new/inside", "i")
        try write(.main, "other", "o")
        _ = try overlay.invalidate(subtree: n("new"))
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "new/inside").node), "i")
        assertErrno(ENOENT, try lookup(overlay, "other"))
    }

    // MARK: changes through the overlay need no invalidation

    func testCreateOfNameCachedAsAbsentIsFoundAtOnce() throws {
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "new"))
        let (created, fd) = try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("new"), in: rootNodeID)
        overlay.release(created.node, fd: try XCTUnwrap(fd))
        let found = try lookup(overlay, "new")
        XCTAssertEqual(found.node, created.node)
        XCTAssertEqual(found.attributes.st_ino, try lstatOf(.patch, "new").st_ino)
    }

    func testLookupAfterUnlinkThroughOverlayIsNoEntry() throws {
        try write(.main, "a", "main")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        try overlay.unlink(Request(overlay), n("a"), in: rootNodeID)
        assertErrno(ENOENT, try lookup(overlay, "a"))
        // the kernel may still hold the node (an open directory, an O_PATH descriptor): it
        // shows the removed entry, here the main bundle's file, which stays as it was
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: a.node).st_size, 4)
        XCTAssertEqual(try lstatOf(.main, "a").st_size, 4, "the main bundle is not touched")
    }

    func testRenameThroughOverlayMovesTheNodeAtOnce() throws {
        try write(.patch, "a", "A")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        assertErrno(ENOENT, try lookup(overlay, "b"))
        try overlay.rename(Request(overlay), n("a"), in: rootNodeID, to: n("b"), in: rootNodeID, flags: 0)
        XCTAssertEqual(try lookup(overlay, "b").node, a.node)
        assertErrno(ENOENT, try lookup(overlay, "a"))
        XCTAssertEqual(try readContent(overlay, a.node), "A")
    }

    func testRenameOverCachedNameDetachesTheReplacedNode() throws {
        try write(.patch, "a", "A")
        try write(.patch, "b", "B")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        let b = try lookup(overlay, "b")
        try overlay.rename(Request(overlay), n("a"), in: rootNodeID, to: n("b"), in: rootNodeID, flags: 0)
        XCTAssertEqual(try lookup(overlay, "b").node, a.node)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "b").node), "A")
        let replaced = try overlay.attributes(Request(overlay), of: b.node)  // the replaced file, no longer named
        XCTAssertEqual(replaced.st_nlink, 0)
        XCTAssertEqual(replaced.st_size, 1)
        overlay.forget(b.node, count: 1)
        assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: b.node))
    }

    func testMkdirAndRmdirThroughOverlayNeedNoInvalidation() throws {
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "d"))
        let (made, _) = try overlay.create(Request(overlay, owner: me), .directory(mode: 0o755), named: n("d"), in: rootNodeID)
        let found = try lookup(overlay, "d")
        XCTAssertEqual(found.node, made.node)
        XCTAssertEqual(fileType(found.attributes), S_IFDIR)
        try overlay.removeDirectory(Request(overlay), n("d"), in: rootNodeID)
        assertErrno(ENOENT, try lookup(overlay, "d"))
        assertErrno(ESTALE, try overlay.listDirectory(Request(overlay), made.node))
    }

    func testRmdirOfMainDirectoryThroughOverlay() throws {
        try mkdir(.main, "e")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "e")
        try overlay.removeDirectory(Request(overlay), n("e"), in: rootNodeID)
        assertErrno(ENOENT, try lookup(overlay, "e"))
        XCTAssertEqual(fileType(try lstatOf(.main, "e")), S_IFDIR, "the main bundle is not touched")
    }

    func testLinkThroughOverlayIsFoundAtOnce() throws {
        try write(.patch, "a", "A")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        assertErrno(ENOENT, try lookup(overlay, "b"))
        _ = try overlay.link(Request(overlay), a.node, as: n("b"), in: rootNodeID)
        XCTAssertEqual(try lookup(overlay, "b").node, a.node)
        XCTAssertEqual(try lstatOf(.patch, "b").st_ino, try lstatOf(.patch, "a").st_ino)
    }

    /// Renaming the second name of a hard link must not change what the first name leads to.
    func testRenamedHardLinkLeavesTheOtherNameWorking() throws {
        try write(.patch, "a", "A")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        _ = try overlay.link(Request(overlay), a.node, as: n("b"), in: rootNodeID)
        try overlay.rename(Request(overlay), n("b"), in: rootNodeID, to: n("c"), in: rootNodeID, flags: 0)
        try overlay.unlink(Request(overlay), n("c"), in: rootNodeID)
        XCTAssertEqual(try lookup(overlay, "a").node, a.node)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: a.node).st_ino, try lstatOf(.patch, "a").st_ino)
        XCTAssertEqual(try readContent(overlay, a.node), "A")
    }

    func testCreateInMainOnlyDirectoryMergesItAtOnce() throws {
        try write(.main, "d/m", "main")
        let overlay = try makeCachingOverlay()
        let dir = try lookup(overlay, "d")
        assertErrno(ENOENT, try lookup(overlay, "d/new"))
        let (made, fd) = try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("new"), in: dir.node)
        overlay.release(made.node, fd: try XCTUnwrap(fd))
        XCTAssertEqual(try lookup(overlay, "d/new").node, made.node)
        XCTAssertNoThrow(try lookup(overlay, "d/m"))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), dir.node)), ["m", "new"])
    }

    func testSetAttributesCopiesUpAndLookupSeesTheCopy() throws {
        try write(.main, "a", "main", mode: 0o644)
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        var changes = Overlay.AttributeChanges()
        changes.mode = 0o600
        _ = try overlay.setAttributes(Request(overlay), a.node, changes, openFile: nil)
        let found = try lookup(overlay, "a")
        XCTAssertEqual(found.node, a.node)
        XCTAssertEqual(found.attributes.st_ino, a.attributes.st_ino, "a copied-up file keeps its inode number")
        XCTAssertEqual(found.attributes.st_mode & 0o7777, 0o600)
        XCTAssertEqual(try lstatOf(.patch, "a").st_mode & 0o7777, 0o600)
    }

    func testWritingOpenCopiesUpAndLookupSeesTheCopy() throws {
        try write(.main, "a", "main")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        let fd = try overlay.openFile(Request(overlay), a.node, flags: O_WRONLY | O_TRUNC).fd
        let bytes = n("changed")
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, 7)
        overlay.release(a.node, fd: fd)
        let found = try lookup(overlay, "a")
        XCTAssertEqual(found.node, a.node)
        XCTAssertEqual(found.attributes.st_ino, a.attributes.st_ino, "a copied-up file keeps its inode number")
        XCTAssertEqual(found.attributes.st_size, 7, "the copy's attributes")
        XCTAssertEqual(try readContent(overlay, a.node), "changed")
    }

    // MARK: statistics

    func testStatisticsCountHitsAndMisses() throws {
        try write(.main, "a", "a")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "a")
        _ = try lookup(overlay, "a")
        assertErrno(ENOENT, try lookup(overlay, "gone"))
        assertErrno(ENOENT, try lookup(overlay, "gone"))
        _ = try lookup(overlay, ".stats")
        let stats = overlay.cacheStatistics
        XCTAssertEqual(stats.misses, 2, "the first lookup of each name")
        XCTAssertEqual(stats.hits, 2, "the second lookup of each name")
        XCTAssertEqual(stats.nodes, 2, "the root and a")
        XCTAssertEqual(stats.absentNames, 1)
    }

    func testFullInvalidationDropsAbsentNamesAndMakesNodesMissAgain() throws {
        try write(.main, "a", "a")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "a")
        assertErrno(ENOENT, try lookup(overlay, "x"))
        assertErrno(ENOENT, try lookup(overlay, "y"))
        XCTAssertEqual(overlay.cacheStatistics.absentNames, 2)
        _ = try overlay.invalidate(subtree: n("/"))  // all of it, changed or not
        XCTAssertEqual(overlay.cacheStatistics.absentNames, 0)
        XCTAssertEqual(overlay.cacheStatistics.nodes, 2, "nodes are kept (stale), not dropped")
        let missesBefore = overlay.cacheStatistics.misses
        _ = try lookup(overlay, "a")
        XCTAssertEqual(overlay.cacheStatistics.misses, missesBefore + 1)
    }

    // MARK: control files

    func testControlFilesAreEmptyRegularFilesAtTheRoot() throws {
        let overlay = try makeCachingOverlay()
        let invalidate = try lookup(overlay, ".invalidate")
        let stats = try lookup(overlay, ".stats")
        XCTAssertEqual(invalidate.node, 2)
        XCTAssertEqual(stats.node, 3)
        XCTAssertEqual(ControlFile.invalidate.node, 2)
        XCTAssertEqual(ControlFile.stats.node, 3)
        let st = try overlay.attributes(Request(overlay), of: ControlFile.invalidate.node)
        XCTAssertEqual(st.st_mode, S_IFREG | 0o644)
        XCTAssertEqual(st.st_size, 0)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: ControlFile.stats.node).st_mode, S_IFREG | 0o444)
    }

    func testControlFilesHideLayerFilesOfTheSameName() throws {
        try write(.main, ".invalidate", "main layer")
        try write(.patch, ".stats", "patch layer")
        let overlay = try makeCachingOverlay()
        XCTAssertEqual(try lookup(overlay, ".invalidate").node, ControlFile.invalidate.node)
        XCTAssertEqual(try lookup(overlay, ".stats").attributes.st_size, 0)
        // neither the control files nor the layers' files of their names are listed
        let items = try overlay.listDirectory(Request(overlay), rootNodeID).named
        XCTAssertEqual(items.filter { $0.name == n(".invalidate") || $0.name == n(".stats") }.count, 0)
    }

    func testControlFileNamesAreOrdinaryOutsideTheRoot() throws {
        try write(.main, "d/.stats", "ordinary")
        let overlay = try makeCachingOverlay()
        XCTAssertEqual(try lookup(overlay, ".stats").node, ControlFile.stats.node)
        let dir = try lookup(overlay, "d")
        let subItems = try overlay.listDirectory(Request(overlay), dir.node).named.map { String(decoding: $0.name, as: UTF8.self) }
        XCTAssertEqual(subItems.sorted(), [".", "..", ".stats"])
        let entry = try lookup(overlay, "d/.stats")
        XCTAssertNotEqual(entry.node, ControlFile.stats.node)
        XCTAssertEqual(try readContent(overlay, entry.node), "ordinary")
    }

    func testControlFilesCannotBeCreatedRemovedOrRenamed() throws {
        try write(.patch, "a", "A")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a")
        assertErrno(EEXIST, try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n(".invalidate"), in: rootNodeID))
        assertErrno(EEXIST, try overlay.create(Request(overlay, owner: me), .directory(mode: 0o755), named: n(".stats"), in: rootNodeID))
        assertErrno(EEXIST, try overlay.link(Request(overlay), a.node, as: n(".stats"), in: rootNodeID))
        assertErrno(EPERM, try overlay.unlink(Request(overlay), n(".invalidate"), in: rootNodeID))
        assertErrno(EPERM, try overlay.removeDirectory(Request(overlay), n(".stats"), in: rootNodeID))
        assertErrno(EPERM, try overlay.rename(Request(overlay), n("a"), in: rootNodeID, to: n(".stats"), in: rootNodeID, flags: 0))
        assertErrno(EPERM, try overlay.rename(Request(overlay), n(".invalidate"), in: rootNodeID, to: n("b"), in: rootNodeID, flags: 0))
        XCTAssertEqual(try readContent(overlay, a.node), "A")
    }

    // MARK: swapping the substitution

    /// Moves the substitution aside and puts an empty directory in its place (both removed in tearDown).
    func swapSubstitution() throws {
        let aside = try makeTemporaryDirectory("patch-old")
        guard rmdir(aside) == 0 else { throw FixtureError("rmdir \(aside)") }
        guard Glibc.rename(patchRoot, aside) == 0 else { throw FixtureError("rename \(patchRoot)") }
        guard Glibc.mkdir(patchRoot, 0o755) == 0 else { throw FixtureError("mkdir \(patchRoot)") }
    }

    func testSwappedSubstitutionIsServedAfterInvalidation() throws {
        try write(.patch, "a", "old")
        let overlay = try makeCachingOverlay()
        XCTAssertFalse(try overlay.invalidate().swappedSubstitution, "nothing swapped yet")
        let old = try lookup(overlay, "a")
        try swapSubstitution()
        try write(.patch, "a", "new")
        try write(.patch, "b", "added")
        XCTAssertEqual(try readContent(overlay, old.node), "old", "the old substitution serves until invalidation")
        XCTAssertTrue(try overlay.invalidate().swappedSubstitution)
        let new = try lookup(overlay, "a")
        XCTAssertNotEqual(new.node, old.node)
        XCTAssertEqual(try readContent(overlay, new.node), "new")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "b").node), "added")
        XCTAssertFalse(try overlay.invalidate().swappedSubstitution, "already in use")
    }

    func testSwapTurnsSubtreeInvalidationIntoFullOne() throws {
        try mkdir(.main, "d")
        let overlay = try makeCachingOverlay()
        assertErrno(ENOENT, try lookup(overlay, "elsewhere"))
        try swapSubstitution()
        try write(.patch, "elsewhere", "e")
        let result = try overlay.invalidate(subtree: n("d"))
        XCTAssertTrue(result.swappedSubstitution)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "elsewhere").node), "e")
    }

    // MARK: found while testing the cache

    func testOpenFilesAreReportedForTheKernelAndKeepTheirAttributes() throws {
        try write(.patch, "open", "old")
        let overlay = try makeCachingOverlay()
        let old = try lookup(overlay, "open")
        let fd = try overlay.openFile(Request(overlay), old.node, flags: O_RDONLY).fd
        defer { overlay.release(old.node, fd: fd) }
        try replaceOnDisk(.patch, "open", "replaced")
        let result = try overlay.invalidate()
        XCTAssertTrue(result.nodes.contains(old.node), "an open file's inode outlives its entry")
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: old.node).st_size, 3, "the open file's own attributes, first time")
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: old.node).st_size, 3)
    }

    func testSubtreeInvalidationAfterRootOpaqueMarkerInvalidatesEverything() throws {
        try write(.main, "m", "m")
        try mkdir(.main, "d")
        let overlay = try makeCachingOverlay()
        _ = try lookup(overlay, "m")
        try write(.patch, ".wh..wh..opq")
        _ = try overlay.invalidate(subtree: n("d"))
        assertErrno(ENOENT, try lookup(overlay, "m"), "the listing and the lookup agree")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), [])
    }

    /// A rename can put a directory at a file's path between the kernel's lookup and its
    /// open (here done on disk, behind the overlay's back): the open must not hand out a
    /// descriptor of that directory (fstat of it would give the kernel a directory's
    /// attributes for a file's inode, which the kernel then marks bad: EIO), but answer
    /// ESTALE, which makes the kernel look the path up again. Before the fix: a descriptor of
    /// the directory. A symlink there fails to open as before (ELOOP: never followed).
    func testOpenOfAFileWhosePathNowHoldsADirectoryIsStale() throws {
        try write(.patch, "f", "file")
        try write(.patch, "l", "file")
        let overlay = try makeCachingOverlay()
        let file = try lookup(overlay, "f").node
        let other = try lookup(overlay, "l").node
        try remove(.patch, "f")
        try mkdir(.patch, "f")
        try remove(.patch, "l")
        try symlink(.patch, "l", to: "f")
        assertErrno(ESTALE, try overlay.openFile(Request(overlay), file, flags: O_RDONLY), "a directory at the path")
        assertErrno(ELOOP, try overlay.openFile(Request(overlay), other, flags: O_RDONLY), "a symlink at the path")
    }
}
