import CSyscalls
import Foundation
import XCTest

/// Which layer serves a name, and how whiteouts and opaque directories hide main entries.
final class ShadowingTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func testFilesDirectoriesAndSymlinksAreShadowed() throws {
        try Disk.write(fx.inMain("file"), "main file")
        try Disk.write(fx.inSubstitution("file"), "patch file, longer")
        try Disk.write(fx.inMain("dir/inner"), "main inner")
        try Disk.write(fx.inSubstitution("dir/inner"), "patch inner")
        try Disk.symlink(fx.inMain("link"), to: "file")
        try Disk.symlink(fx.inSubstitution("link"), to: "dir/inner")
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount("file")), "patch file, longer")
        XCTAssertEqual(Disk.lstat(fx.inMount("file"))?.st_size, 18)
        XCTAssertEqual(try Disk.read(fx.inMount("dir/inner")), "patch inner")
        XCTAssertEqual(Disk.readLink(fx.inMount("link")), "dir/inner")
        XCTAssertEqual(try Disk.read(fx.inMount("link")), "patch inner")
    }

    func testTypeChangesAcrossLayers() throws {
        // file in main, directory in the patch: the directory wins and is not merged
        try Disk.write(fx.inMain("a"), "main a")
        try Disk.write(fx.inSubstitution("a/child"), "patch child")
        // directory in main, file in the patch: the file wins, main's children are gone
        try Disk.write(fx.inMain("b/child"), "main child")
        try Disk.write(fx.inSubstitution("b"), "patch b")
        // directory in main, symlink in the patch
        try Disk.write(fx.inMain("c/child"), "main c child")
        try Disk.symlink(fx.inSubstitution("c"), to: "a")
        try fx.start()
        XCTAssertEqual(Disk.lstat(fx.inMount("a")).map { $0.st_mode & S_IFMT }, S_IFDIR)
        XCTAssertEqual(try Disk.list(fx.inMount("a")), ["child"])
        XCTAssertEqual(Disk.lstat(fx.inMount("b")).map { $0.st_mode & S_IFMT }, S_IFREG)
        XCTAssertEqual(try Disk.read(fx.inMount("b")), "patch b")
        XCTAssertEqual(Disk.lstatError(fx.inMount("b/child")), ENOTDIR)
        XCTAssertEqual(Disk.lstat(fx.inMount("c")).map { $0.st_mode & S_IFMT }, S_IFLNK)
        XCTAssertEqual(try Disk.list(fx.inMount("c")), ["child"])  // through the symlink to a/
        XCTAssertEqual(try Disk.read(fx.inMount("c/child")), "patch child")
    }

    func testMergedListingHasEveryNameOnce() throws {
        for name in ["both1", "both2", "onlyMain1", "onlyMain2"] { try Disk.write(fx.inMain("d/\(name)"), name) }
        for name in ["both1", "both2", "onlyPatch"] { try Disk.write(fx.inSubstitution("d/\(name)"), name + "!") }
        try Disk.mkdir(fx.inMain("d/sub"))
        try Disk.mkdir(fx.inSubstitution("d/sub"))
        try fx.start()
        let names = try Disk.list(fx.inMount("d"))
        XCTAssertEqual(names.count, Set(names).count, "duplicates in \(names)")
        XCTAssertEqual(names.sorted(), ["both1", "both2", "onlyMain1", "onlyMain2", "onlyPatch", "sub"])
        XCTAssertEqual(try Disk.read(fx.inMount("d/both2")), "both2!")
        XCTAssertEqual(try Disk.read(fx.inMount("d/onlyMain2")), "onlyMain2")
    }

    func testWhiteoutHidesOnlyItsSibling() throws {
        try Disk.write(fx.inMain("x"), "root x")
        try Disk.write(fx.inMain("sub/x"), "sub x")
        try Disk.write(fx.inMain("sub/deeper/x"), "deeper x")
        try Disk.write(fx.inMain("keep"), "keep")
        try Disk.whiteout(fx.substitution, "x")
        try fx.start()
        XCTAssertEqual(Disk.lstatError(fx.inMount("x")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("sub/x")), "sub x")
        XCTAssertEqual(try Disk.read(fx.inMount("sub/deeper/x")), "deeper x")
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["keep", "sub"])
        XCTAssertEqual(try Disk.list(fx.inMount("sub")).sorted(), ["deeper", "x"])
    }

    func testWhiteoutNamesAreNeverVisible() throws {
        try Disk.write(fx.inMain("a"), "a")
        try Disk.whiteout(fx.substitution, "a")
        try Disk.whiteout(fx.substitution, "never-existed")
        try Disk.write(fx.inMain(".wh.inmain"), "a main file named like a whiteout")
        try Disk.opaque(fx.inSubstitution("o"))
        try fx.start()
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["o"])
        for name in [".wh.a", ".wh.never-existed", ".wh.inmain", "o/.wh..wh..opq", ".wh..wh..opq"] {
            XCTAssertEqual(Disk.lstatError(fx.inMount(name)), ENOENT, name)
        }
    }

    func testWhiteoutHidesAWholeDirectory() throws {
        try Disk.write(fx.inMain("gone/a/b/c"), "deep")
        try Disk.write(fx.inMain("stays"), "s")
        try Disk.whiteout(fx.substitution, "gone")
        try fx.start()
        XCTAssertEqual(Disk.lstatError(fx.inMount("gone")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("gone/a/b/c")), ENOENT)
        XCTAssertEqual(try Disk.list(fx.mountpoint), ["stays"])
    }

    func testOpaqueDirectoryShowsOnlyTheSubstitution() throws {
        try Disk.write(fx.inMain("res/old1"), "o1")
        try Disk.write(fx.inMain("res/old2/deep"), "o2")
        try Disk.write(fx.inMain("res/same"), "main same")
        try Disk.write(fx.inMain("other/kept"), "kept")
        try Disk.opaque(fx.inSubstitution("res"))
        try Disk.write(fx.inSubstitution("res/new"), "new")
        try Disk.write(fx.inSubstitution("res/same"), "patch same")
        try fx.start()
        XCTAssertEqual(try Disk.list(fx.inMount("res")).sorted(), ["new", "same"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("res/old1")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("res/old2")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("res/same")), "patch same")
        XCTAssertEqual(try Disk.read(fx.inMount("other/kept")), "kept")
    }

    func testOverlayfsWhiteoutFormsAreHonoured() throws {
        try Disk.write(fx.inMain("dev-hidden"), "x")
        try Disk.write(fx.inMain("xattr-opaque/old"), "old")
        try Disk.write(fx.inSubstitution("xattr-opaque/new"), "new")
        guard mknod(fx.inSubstitution("dev-hidden"), S_IFCHR | 0o600, 0) == 0 else {
            throw XCTSkip("cannot create a 0/0 character device (not root?)")
        }
        guard setxattr(fx.inSubstitution("xattr-opaque"), "trusted.overlay.opaque", "y", 1, 0) == 0 else {
            throw XCTSkip("cannot set trusted xattrs here")
        }
        try fx.start()
        XCTAssertEqual(Disk.lstatError(fx.inMount("dev-hidden")), ENOENT)
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["xattr-opaque"])
        XCTAssertEqual(try Disk.list(fx.inMount("xattr-opaque")), ["new"])
    }

    func testDeepTreesInOneLayerAndEmptyDirectories() throws {
        let deepMain = (1...40).map { "m\($0)" }.joined(separator: "/")
        let deepPatch = (1...40).map { "p\($0)" }.joined(separator: "/")
        try Disk.write(fx.inMain(deepMain + "/leaf"), "main leaf")
        try Disk.write(fx.inSubstitution(deepPatch + "/leaf"), "patch leaf")
        try Disk.mkdir(fx.inMain("emptyMain"))
        try Disk.mkdir(fx.inSubstitution("emptyPatch"))
        try Disk.mkdir(fx.inMain("emptyBoth"))
        try Disk.mkdir(fx.inSubstitution("emptyBoth"))
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount(deepMain + "/leaf")), "main leaf")
        XCTAssertEqual(try Disk.read(fx.inMount(deepPatch + "/leaf")), "patch leaf")
        for empty in ["emptyMain", "emptyPatch", "emptyBoth"] {
            XCTAssertEqual(try Disk.list(fx.inMount(empty)), [], empty)
        }
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["emptyBoth", "emptyMain", "emptyPatch", "m1", "p1"])
    }
}
