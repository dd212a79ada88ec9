import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Which layer a name resolves to: shadowing, merging and type changes across the layers.
final class ResolutionTests: OverlayTestCase {
    // MARK: one layer only

    func testFileOnlyInMainIsServedFromMain() throws {
        try write(.main, "a.txt", "main a")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "a.txt")
        XCTAssertEqual(fileType(entry.attributes), S_IFREG)
        XCTAssertEqual(entry.attributes.st_ino, try lstatOf(.main, "a.txt").st_ino)
        XCTAssertEqual(entry.attributes.st_size, 6)
        XCTAssertEqual(try readContent(overlay, entry.node), "main a")
    }

    func testFileOnlyInSubstitutionIsServedFromSubstitution() throws {
        try write(.patch, "new.txt", "patch new")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "new.txt")
        XCTAssertEqual(fileType(entry.attributes), S_IFREG)
        XCTAssertEqual(entry.attributes.st_ino, try lstatOf(.patch, "new.txt").st_ino)
        XCTAssertEqual(try readContent(overlay, entry.node), "patch new")
    }

    func testMissingNameIsNoEntry() throws {
        try write(.main, "present", "x")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("absent")))
        XCTAssertEqual(overlay.nodeCount, 1, "a failed lookup must not create a node")
    }

    // MARK: shadowing

    func testSubstitutionFileShadowsMainFile() throws {
        try write(.main, "a.txt", "main version")
        try write(.patch, "a.txt", "patch")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "a.txt")
        XCTAssertEqual(entry.attributes.st_ino, try lstatOf(.patch, "a.txt").st_ino)
        XCTAssertEqual(entry.attributes.st_size, 5)
        XCTAssertEqual(try readContent(overlay, entry.node), "patch")
    }

    func testSubstitutionSymlinkShadowsMainFile() throws {
        try write(.main, "icon.png", "main icon")
        try write(.main, "other.png", "other")
        try symlink(.patch, "icon.png", to: "other.png")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "icon.png")
        XCTAssertEqual(fileType(entry.attributes), S_IFLNK)
        XCTAssertEqual(entry.attributes.st_ino, try lstatOf(.patch, "icon.png").st_ino)
        XCTAssertEqual(try overlay.readLink(Request(overlay), entry.node), n("other.png"))
    }

    func testSubstitutionFileShadowsMainSymlink() throws {
        try write(.main, "target", "t")
        try symlink(.main, "link", to: "target")
        try write(.patch, "link", "now a file")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "link")
        XCTAssertEqual(fileType(entry.attributes), S_IFREG)
        XCTAssertEqual(try readContent(overlay, entry.node), "now a file")
    }

    func testSubstitutionSymlinkShadowsMainSymlink() throws {
        try symlink(.main, "link", to: "main-target")
        try symlink(.patch, "link", to: "patch-target")
        let overlay = try makeOverlay()
        let entry = try lookup(overlay, "link")
        XCTAssertEqual(fileType(entry.attributes), S_IFLNK)
        XCTAssertEqual(try overlay.readLink(Request(overlay), entry.node), n("patch-target"))
    }

    func testDirectoriesInBothLayersAreMerged() throws {
        try write(.main, "res/only-main", "m")
        try write(.main, "res/both", "main both")
        try write(.patch, "res/only-patch", "p")
        try write(.patch, "res/both", "patch both")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        XCTAssertEqual(fileType(res.attributes), S_IFDIR)
        XCTAssertEqual(res.attributes.st_ino, try lstatOf(.patch, "res").st_ino, "a merged directory shows the substitution's")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "res/only-main").node), "m")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "res/only-patch").node), "p")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "res/both").node), "patch both")
    }

    func testMergeReachesThreeLevelsDown() throws {
        try write(.main, "a/b/c/deep-main", "dm")
        try write(.patch, "a/b/c/deep-patch", "dp")
        try write(.main, "a/b/c/shared", "main")
        try write(.patch, "a/b/c/shared", "patch")
        let overlay = try makeOverlay()
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "a/b/c/deep-main").node), "dm")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "a/b/c/deep-patch").node), "dp")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "a/b/c/shared").node), "patch")
    }

    func testMainOnlyDirectoryBelowMergedDirectory() throws {
        try write(.main, "a/b/file", "below")
        try write(.patch, "a/patched", "p")
        let overlay = try makeOverlay()
        let b = try lookup(overlay, "a/b")
        XCTAssertEqual(fileType(b.attributes), S_IFDIR)
        XCTAssertEqual(b.attributes.st_ino, try lstatOf(.main, "a/b").st_ino)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "a/b/file").node), "below")
    }

    func testDirectoryOnlyInSubstitutionHoldsOnlyItsEntries() throws {
        // a directory only in the substitution holds only the substitution's entries
        try write(.patch, "added/x", "px")
        try write(.main, "x", "main x at the root")
        let overlay = try makeOverlay()
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "added/x").node), "px")
        assertErrno(ENOENT, try self.lookup(overlay, "added/y"))
    }

    // MARK: type changes across the layers

    func testDirectoryInSubstitutionOverFileInMainIsNotMerged() throws {
        try write(.main, "thing", "main file")
        try write(.patch, "thing/inside", "patch inside")
        let overlay = try makeOverlay()
        let thing = try lookup(overlay, "thing")
        XCTAssertEqual(fileType(thing.attributes), S_IFDIR)
        XCTAssertEqual(thing.attributes.st_ino, try lstatOf(.patch, "thing").st_ino)
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), thing.node)), ["inside"])
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "thing/inside").node), "patch inside")
        assertErrno(EISDIR, try overlay.openFile(Request(overlay), thing.node, flags: O_RDONLY))
    }

    func testFileInSubstitutionOverDirectoryInMain() throws {
        try write(.main, "thing/child", "main child")
        try write(.patch, "thing", "patch file")
        let overlay = try makeOverlay()
        let thing = try lookup(overlay, "thing")
        XCTAssertEqual(fileType(thing.attributes), S_IFREG)
        XCTAssertEqual(thing.attributes.st_ino, try lstatOf(.patch, "thing").st_ino)
        XCTAssertEqual(try readContent(overlay, thing.node), "patch file")
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: thing.node, name: n("child")))
        assertErrno(ENOTDIR, try overlay.listDirectory(Request(overlay), thing.node))
    }

    func testSymlinkInSubstitutionOverDirectoryInMainIsNotADirectory() throws {
        try write(.main, "dir/child", "main child")
        try symlink(.patch, "dir", to: "elsewhere")
        let overlay = try makeOverlay()
        let dir = try lookup(overlay, "dir")
        XCTAssertEqual(fileType(dir.attributes), S_IFLNK)
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: dir.node, name: n("child")))
    }

    // MARK: names

    func testNameLongerThan255BytesIsTooLong() throws {
        let overlay = try makeOverlay()
        assertErrno(ENAMETOOLONG, try overlay.lookup(Request(overlay), parent: rootNodeID, name: [UInt8](repeating: 0x61, count: 256)))
        assertErrno(ENAMETOOLONG, try overlay.lookup(Request(overlay), parent: rootNodeID, name: [UInt8](repeating: 0x61, count: 4096)))
    }

    func testLongNamesInSubstitutionAreFound() throws {
        for length in [251, 252, 255] {
            try write(.patch, String(repeating: "p", count: length), "patch \(length)")
        }
        let overlay = try makeOverlay()
        for length in [251, 252, 255] {
            let entry = try overlay.lookup(Request(overlay), parent: rootNodeID, name: n(String(repeating: "p", count: length)))
            XCTAssertEqual(try readContent(overlay, entry.node), "patch \(length)")
        }
    }

    /// Names of 252 to 255 bytes are valid on the main bundle's file system and are listed;
    /// their whiteout name (`.wh.` + name) would be too long, which must not make them unreachable.
    func testLongNamesInMainAreFound() throws {
        for length in [251, 252, 255] {
            try write(.main, String(repeating: "m", count: length), "main \(length)")
        }
        let overlay = try makeOverlay()
        let listed = entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)).map(\.count)
        XCTAssertEqual(listed.sorted(), [251, 252, 255])
        for length in [251, 252, 255] {
            do {
                let entry = try overlay.lookup(Request(overlay), parent: rootNodeID, name: n(String(repeating: "m", count: length)))
                XCTAssertEqual(try readContent(overlay, entry.node), "main \(length)")
            } catch {
                XCTFail("lookup of a listed \(length)-byte main name failed: \(error)")
            }
        }
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: [UInt8](repeating: 0x63, count: 255)),
                    "an absent 255-byte name")
    }

    func testDotDotDotAndEmptyNamesAreInvalid() throws {
        let overlay = try makeOverlay()
        assertErrno(EINVAL, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n(".")))
        assertErrno(EINVAL, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("..")))
        assertErrno(EINVAL, try overlay.lookup(Request(overlay), parent: rootNodeID, name: []))
    }

    func testNonUTF8NamesAreLookedUpAsBytes() throws {
        let name: [UInt8] = [0x66, 0xFF, 0xFE, 0x0A, 0x67]  // "f", two invalid bytes, newline, "g"
        let fd = name.withUnsafeBufferPointer { buffer -> Int32 in
            var path = Array((mainRoot + "/").utf8)
            path.append(contentsOf: buffer)
            path.append(0)
            return path.withUnsafeBufferPointer { p in
                p.baseAddress!.withMemoryRebound(to: CChar.self, capacity: path.count) {
                    open($0, O_WRONLY | O_CREAT, 0o644)
                }
            }
        }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let overlay = try makeOverlay()
        let entry = try overlay.lookup(Request(overlay), parent: rootNodeID, name: name)
        XCTAssertEqual(fileType(entry.attributes), S_IFREG)
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        XCTAssertEqual(listing.named.filter { $0.name == name }.count, 1)
    }

    /// readlink(2) of something that is not a symlink is EINVAL ("not a symbolic link").
    func testReadLinkOfANonSymlinkIsInvalid() throws {
        try write(.main, "file", "f")
        try mkdir(.patch, "dir")
        let overlay = try makeOverlay()
        assertErrno(EINVAL, try overlay.readLink(Request(overlay), try lookup(overlay, "file").node), "regular file")
        assertErrno(EINVAL, try overlay.readLink(Request(overlay), try lookup(overlay, "dir").node), "directory")
    }

    func testLookupBelowAFileIsNotADirectory() throws {
        try write(.main, "file", "f")
        let overlay = try makeOverlay()
        let file = try lookup(overlay, "file")
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: file.node, name: n("x")))
    }

    func testLookupBelowAnUnknownNodeIsStale() throws {
        try mkdir(.main, "dir")
        let overlay = try makeOverlay()
        let dir = try lookup(overlay, "dir")
        overlay.forget(dir.node, count: 1)
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: dir.node, name: n("x")), "a forgotten node is still known")
        assertErrno(ESTALE, try overlay.lookup(Request(overlay), parent: 987_654, name: n("x")))
    }

    // MARK: changes made directly in a layer

    func testAFileAddedToTheSubstitutionShowsAfterInvalidation() throws {
        try write(.main, "a.txt", "main")
        let overlay = try makeOverlay()
        let first = try lookup(overlay, "a.txt")
        XCTAssertEqual(try readContent(overlay, first.node), "main")
        try write(.patch, "a.txt", "patched later")
        let cached = try lookup(overlay, "a.txt")
        XCTAssertEqual(cached.node, first.node)
        XCTAssertEqual(cached.attributes.st_ino, try lstatOf(.main, "a.txt").st_ino, "the cache serves the old view")
        _ = try overlay.invalidate()
        let second = try lookup(overlay, "a.txt")
        XCTAssertNotEqual(second.node, first.node, "another file: another node")
        XCTAssertEqual(second.attributes.st_ino, try lstatOf(.patch, "a.txt").st_ino)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: second.node).st_ino, try lstatOf(.patch, "a.txt").st_ino)
        XCTAssertEqual(try readContent(overlay, second.node), "patched later")
    }

    func testADirectoryAddedToTheSubstitutionMergesAfterInvalidation() throws {
        try write(.main, "dir/m", "m")
        let overlay = try makeOverlay()
        let first = try lookup(overlay, "dir")
        XCTAssertEqual(first.attributes.st_ino, try lstatOf(.main, "dir").st_ino)
        try write(.patch, "dir/p", "p")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), first.node)), ["m"], "the cache serves the old view")
        _ = try overlay.invalidate()
        let second = try lookup(overlay, "dir")
        XCTAssertEqual(second.node, first.node, "a directory keeps its node")
        XCTAssertEqual(second.attributes.st_ino, try lstatOf(.patch, "dir").st_ino)
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), second.node)), ["m", "p"])
    }
}
