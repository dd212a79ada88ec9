import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Deletions recorded in the substitution: `.wh.NAME`, `.wh..wh..opq`, 0/0 character devices
/// and the `overlay.opaque` extended attributes.
final class WhiteoutTests: OverlayTestCase {
    // MARK: .wh.NAME

    func testRootWhiteoutHidesOnlyTheRootName() throws {
        try write(.main, "x", "root x")
        try write(.main, "sub/x", "sub x")            // sub only in main
        try write(.main, "merged/x", "merged x")      // merged with the substitution's
        try write(.patch, "merged/other", "o")
        try write(.patch, ".wh.x")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("x")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["merged", "sub"])
        let subX = try lookup(overlay, "sub/x")
        XCTAssertEqual(try readContent(overlay, subX.node), "sub x")
        let mergedX = try lookup(overlay, "merged/x")
        XCTAssertEqual(try readContent(overlay, mergedX.node), "merged x")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "sub").node)), ["x"])
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "merged").node)), ["other", "x"])
    }

    func testWhiteoutInSubdirectoryHidesOnlyThatSibling() throws {
        try write(.main, "sub/x", "sub x")
        try write(.main, "sub/y", "sub y")
        try write(.main, "x", "root x")
        try write(.patch, "sub/.wh.x")
        let overlay = try makeOverlay()
        let sub = try lookup(overlay, "sub")
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: sub.node, name: n("x")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), sub.node)), ["y"])
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "x").node), "root x")
    }

    func testWhiteoutOfADirectory() throws {
        try write(.main, "gone/inner/file", "f")
        try write(.main, "kept", "k")
        try write(.patch, ".wh.gone")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("gone")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["kept"])
    }

    func testWhiteoutOfASymlink() throws {
        try symlink(.main, "link", to: "target")
        try write(.patch, ".wh.link")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("link")))
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", ".."])
    }

    func testWhiteoutThatIsADirectoryAlsoHides() throws {
        try write(.main, "x", "x")
        try mkdir(.patch, ".wh.x")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("x")))
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", ".."])
    }

    func testWhiteoutWithoutAMainEntryIsHarmless() throws {
        try write(.patch, ".wh.never-existed")
        try write(.main, "other", "o")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("never-existed")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["other"])
    }

    func testSubstitutionEntryBesideItsOwnWhiteoutIsShown() throws {
        // the whiteout hides the main bundle's entry; the substitution's own entry is shown
        try write(.main, "x", "main")
        try write(.patch, "x", "patch")
        try write(.patch, ".wh.x")
        let overlay = try makeOverlay()
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "x").node), "patch")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["x"])
    }

    /// `.wh.d` hides the main bundle's `d`; a directory `d` in the substitution is then a new,
    /// unmerged directory (OCI: a whiteout applies to the lower layers only, so the upper `d`
    /// replaces a deleted `d`). Listing and lookup must agree on this.
    func testSubstitutionDirectoryBesideItsOwnWhiteoutIsNotMerged() throws {
        try write(.main, "d/old", "main old")
        try write(.patch, "d/new", "patch new")
        try write(.patch, ".wh.d")
        let overlay = try makeOverlay()
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["d"])
        let d = try lookup(overlay, "d")
        XCTAssertEqual(d.attributes.st_ino, try lstatOf(.patch, "d").st_ino)
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), d.node)), ["new"],
                       "main's d was whited out: its entries must not be merged in")
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: d.node, name: n("old")),
                    "main's d/old is below a whiteout")
    }

    // MARK: .wh. names themselves

    func testWhiteoutNamesAreNeverListedNorFound() throws {
        try write(.main, "x", "x")
        try write(.main, "sub/y", "y")
        try write(.patch, ".wh.x")
        try write(.patch, "sub/.wh..wh..opq")
        try write(.patch, "sub/new", "n")
        try write(.patch, ".wh.never-existed")
        try write(.main, ".wh.in-main", "a whiteout-like name in the main bundle")
        try mkdir(.patch, ".wh..wh.work")
        let overlay = try makeOverlay()
        let rootNames = names(try overlay.listDirectory(Request(overlay), rootNodeID))
        XCTAssertEqual(rootNames, [".", "..", "sub"])
        for name in [".wh.x", ".wh.never-existed", ".wh.in-main", ".wh..wh.work", ".wh..wh..opq", ".wh.", ".wh.absent"] {
            assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n(name)), name)
        }
        let sub = try lookup(overlay, "sub")
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), sub.node)), [".", "..", "new"])
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: sub.node, name: n(".wh..wh..opq")))
        XCTAssertEqual(overlay.nodeCount, 2, "failed lookups created nodes")
    }

    // MARK: opaque directories

    func testOpaqueMarkerHidesAllMainEntriesOfItsDirectory() throws {
        try write(.main, "res/a", "a")
        try write(.main, "res/b", "b")
        try write(.main, "res/deep/c", "c")
        try write(.main, "res/shared", "main shared")
        try write(.patch, "res/.wh..wh..opq")
        try write(.patch, "res/new", "new")
        try write(.patch, "res/shared", "patch shared")
        try write(.main, "outside-res", "still visible")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        XCTAssertEqual(res.attributes.st_ino, try lstatOf(.patch, "res").st_ino)
        XCTAssertEqual(Array(names(try overlay.listDirectory(Request(overlay), res.node)).prefix(2)), [".", ".."])
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), res.node)), ["new", "shared"])
        for name in ["a", "b", "deep"] {
            assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: res.node, name: n(name)), name)
        }
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "res/shared").node), "patch shared")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "outside-res").node), "still visible")
    }

    func testOpaqueDirectoryWithoutNewEntriesIsEmpty() throws {
        try write(.main, "res/a", "a")
        try write(.patch, "res/.wh..wh..opq")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), res.node)), [".", ".."])
    }

    func testOpaqueRootHidesTheWholeMainBundle() throws {
        try write(.main, "a", "a")
        try write(.main, "dir/b", "b")
        try write(.patch, ".wh..wh..opq")
        try write(.patch, "c", "c")
        let overlay = try makeOverlay()
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", "..", "c"])
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("a")))
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("dir")))
    }

    func testOpaqueMarkerOnlyAffectsItsOwnDirectory() throws {
        try write(.main, "res/inner/a", "a")
        try write(.main, "res/top", "t")
        try write(.patch, "res/inner/.wh..wh..opq")
        try write(.patch, "res/inner/b", "b")
        let overlay = try makeOverlay()
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "res").node)), ["inner", "top"])
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "res/inner").node)), ["b"])
    }

    func testTrustedOpaqueAttributeMakesADirectoryOpaque() throws {
        try checkOpaqueAttribute("trusted.overlay.opaque")
    }

    func testUserOpaqueAttributeMakesADirectoryOpaque() throws {
        try checkOpaqueAttribute("user.overlay.opaque")
    }

    private func checkOpaqueAttribute(_ attribute: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try write(.main, "res/a", "a")
        try write(.main, "res/b", "b")
        try write(.patch, "res/c", "c")
        try setAttribute(.patch, "res", attribute, "y")
        try write(.main, "plain/a", "a")
        try write(.patch, "plain/c", "c")
        try setAttribute(.patch, "plain", attribute, "n")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), res.node)), [".", "..", "c"], file: file, line: line)
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: res.node, name: n("a")), file: file, line: line)
        let plain = try lookup(overlay, "plain")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), plain.node)), ["a", "c"],
                       "only the value y makes a directory opaque", file: file, line: line)
    }

    func testOpaqueAttributesOfNestedDirectoriesAreReadBesideThem() throws {
        for attribute in Whiteout.opaqueAttributes {
            let dir = "deep/\(attribute)/res"
            try write(.main, dir + "/a", "a")
            try write(.patch, dir + "/c", "c")
            try setAttribute(.patch, dir, attribute, "y")
        }
        let overlay = try makeCachingOverlay()
        for attribute in Whiteout.opaqueAttributes {
            let res = try lookup(overlay, "deep/\(attribute)/res")
            XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), res.node)), ["c"], attribute)
        }
    }

    func testOpaqueAttributeOnTheSubstitutionRoot() throws {
        try write(.main, "a", "a")
        try write(.patch, "c", "c")
        try setAttribute(.patch, "", "trusted.overlay.opaque", "y")
        let overlay = try makeOverlay()
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", "..", "c"])
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("a")))
    }

    // MARK: overlayfs' character device whiteouts

    func testCharacterDevice00IsAWhiteout() throws {
        try write(.main, "x", "x")
        try write(.main, "dir/f", "f")
        try write(.main, "sub/y", "y")
        try write(.main, "kept", "k")
        try whiteoutDevice(.patch, "x")
        try whiteoutDevice(.patch, "dir")
        try whiteoutDevice(.patch, "sub/y")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("x")))
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("dir")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["kept", "sub"])
        let sub = try lookup(overlay, "sub")
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: sub.node, name: n("y")))
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), sub.node)), [".", ".."])
    }

    func testCharacterDevice00WithoutMainEntryIsNotShown() throws {
        try whiteoutDevice(.patch, "ghost")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("ghost")))
        XCTAssertEqual(names(try overlay.listDirectory(Request(overlay), rootNodeID)), [".", ".."])
    }

    func testOtherCharacterDevicesAreNotWhiteouts() throws {
        try write(.main, "x", "x")
        try makeCharacterDevice(.patch, "x", major: 1, minor: 3)
        try makeCharacterDevice(.patch, "zero-minor", major: 0, minor: 1)
        let overlay = try makeOverlay()
        let x = try lookup(overlay, "x")
        XCTAssertEqual(fileType(x.attributes), S_IFCHR)
        XCTAssertEqual(x.attributes.st_rdev, deviceNumber(1, 3))
        XCTAssertEqual(fileType(try lookup(overlay, "zero-minor").attributes), S_IFCHR)
        let listing = try overlay.listDirectory(Request(overlay), rootNodeID)
        XCTAssertEqual(entryNames(listing), ["x", "zero-minor"])
        XCTAssertEqual(item(listing, "x")?.type, UInt8(DT_CHR))
    }

    func testWhiteoutDeviceInTheMainBundleIsNotShown() throws {
        // overlayfs hides whiteouts of its lowest layer too
        try whiteoutDevice(.main, "w")
        try write(.main, "kept", "k")
        let overlay = try makeOverlay()
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n("w")))
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), rootNodeID)), ["kept"])
    }
}
