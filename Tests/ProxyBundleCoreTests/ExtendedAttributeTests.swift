import CSyscalls
import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Extended attributes come from the serving layer; the overlay's own are hidden.
final class ExtendedAttributeTests: OverlayTestCase {
    private func attributeNames(_ overlay: Overlay, _ node: NodeID) throws -> Set<String> {
        let bytes = try overlay.extendedAttributeNames(Request(overlay), node)
        if !bytes.isEmpty { XCTAssertEqual(bytes.last, 0, "names are NUL-terminated") }
        return Set(bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) })
    }

    func testUserAttributeOfAMainFileIsVisible() throws {
        try write(.main, "f", "f")
        try setAttribute(.main, "f", "user.test", "hello")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.test")), n("hello"))
        XCTAssertEqual(try attributeNames(overlay, f.node), ["user.test"])
        XCTAssertEqual(try overlay.extendedAttributeNames(Request(overlay), f.node), n("user.test") + [0])
    }

    func testMissingAttributeIsNoData() throws {
        try write(.main, "f", "f")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.absent")))
        XCTAssertEqual(try overlay.extendedAttributeNames(Request(overlay), f.node), [])
    }

    func testShadowingFileShowsOnlyItsOwnAttributes() throws {
        try write(.main, "f", "main")
        try setAttribute(.main, "f", "user.from-main", "m")
        try setAttribute(.main, "f", "user.both", "main value")
        try write(.patch, "f", "patch")
        try setAttribute(.patch, "f", "user.from-patch", "p")
        try setAttribute(.patch, "f", "user.both", "patch value")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        XCTAssertEqual(try attributeNames(overlay, f.node), ["user.from-patch", "user.both"])
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.both")), n("patch value"))
        assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.from-main")))
    }

    func testEmptyAndBinaryValues() throws {
        try write(.main, "f", "f")
        let binary: [UInt8] = [0, 1, 2, 0xFF, 0, 0x80]
        let result = binary.withUnsafeBytes { lsetxattr(path(.main, "f"), "user.binary", $0.baseAddress, $0.count, 0) }
        XCTAssertEqual(result, 0)
        try setAttribute(.main, "f", "user.empty", "")
        let big = String(repeating: "v", count: 3000)
        try setAttribute(.main, "f", "user.big", big)
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.binary")), binary)
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.empty")), [])
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.big")), n(big))
    }

    func testOverlayAttributesAreHiddenFromGetAndList() throws {
        try write(.main, "res/a", "a")
        try mkdir(.patch, "res")
        try setAttribute(.patch, "res", "trusted.overlay.opaque", "y")
        try setAttribute(.patch, "res", "user.overlay.opaque", "y")
        try setAttribute(.patch, "res", "trusted.overlay.origin", "whatever")
        try setAttribute(.patch, "res", "user.visible", "v")
        try setAttribute(.patch, "res", "trusted.other", "t")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        for name in ["trusted.overlay.opaque", "user.overlay.opaque", "trusted.overlay.origin"] {
            assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), res.node, name: n(name)), name)
        }
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), res.node, name: n("user.visible")), n("v"))
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), res.node, name: n("trusted.other")), n("t"))
        XCTAssertEqual(try attributeNames(overlay, res.node), ["user.visible", "trusted.other"])
    }

    func testOverlayAttributesOnTheRootAreHidden() throws {
        try setAttribute(.patch, "", "user.overlay.opaque", "n")
        try setAttribute(.patch, "", "user.root", "r")
        let overlay = try makeOverlay()
        assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), rootNodeID, name: n("user.overlay.opaque")))
        XCTAssertEqual(try attributeNames(overlay, rootNodeID), ["user.root"])
    }

    func testAttributesOfAMainOnlyDirectory() throws {
        try mkdir(.main, "d")
        try setAttribute(.main, "d", "user.dir", "main dir")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), d.node, name: n("user.dir")), n("main dir"))
    }

    func testAttributesOfAMergedDirectoryAreTheSubstitutions() throws {
        try mkdir(.main, "d")
        try setAttribute(.main, "d", "user.main", "m")
        try mkdir(.patch, "d")
        try setAttribute(.patch, "d", "user.patch", "p")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d")
        XCTAssertEqual(try attributeNames(overlay, d.node), ["user.patch"])
    }
    /// With lookups cached, a node's attributes are read beside it, through its directory's
    /// kept descriptor: the node's own (a symlink's, not its target's), from the layer serving
    /// it, and from its copy once it has one.
    func testCachedAttributesAreTheNodesOwnFromItsLayer() throws {
        try write(.main, "d/e/f", "f")
        try setAttribute(.main, "d/e/f", "user.where", "main")
        try write(.patch, "d/e/g", "g")
        try setAttribute(.patch, "d/e/g", "user.where", "patch")
        try write(.main, "d/e/target", "t")
        try setAttribute(.main, "d/e/target", "trusted.where", "target")
        try symlink(.main, "d/e/link", to: "target")
        try setAttribute(.main, "d/e/link", "trusted.where", "link")
        let overlay = try makeCachingOverlay()
        let f = try lookup(overlay, "d/e/f")
        let g = try lookup(overlay, "d/e/g")
        let link = try lookup(overlay, "d/e/link")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.where")), n("main"))
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), g.node, name: n("user.where")), n("patch"))
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), link.node, name: n("trusted.where")), n("link"))
        XCTAssertEqual(try attributeNames(overlay, link.node), ["trusted.where"])
        assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.absent")))

        try overlay.setExtendedAttribute(Request(overlay), f.node, name: n("user.added"), value: n("copy"), flags: 0)
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.added")), n("copy"))
        XCTAssertEqual(try attributeNames(overlay, f.node), ["user.where", "user.added"])
        XCTAssertEqual(try lstatOf(.main, "d/e/f").st_size, 1, "the main bundle's file is untouched")
    }

    /// Like lookups, attribute reads go through the directory's kept descriptors until the next
    /// invalidation (see `DirectoryCache`): a directory moved behind the daemon's back is read
    /// where it went, not looked for by its old path.
    func testCachedAttributesAreReadThroughTheKeptDirectory() throws {
        try write(.main, "d/f", "f")
        try setAttribute(.main, "d/f", "user.a", "1")
        let overlay = try makeCachingOverlay()
        let f = try lookup(overlay, "d/f")
        try rename(.main, "d", "moved")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.a")), n("1"))
        XCTAssertEqual(try attributeNames(overlay, f.node), ["user.a"])
        _ = try overlay.invalidate()
        assertErrno(ESTALE, try overlay.extendedAttribute(Request(overlay), f.node, name: n("user.a")), "gone: its name is resolved again")
    }
    /// A main-bundle directory copied up (to make an entry in it) keeps its extended
    /// attributes, a default ACL among them, as kernel overlayfs keeps them.
    func testCopiedUpDirectoryKeepsItsAttributes() throws {
        try write(.main, "d/e/f", "f")
        try setAttribute(.main, "d", "user.dir", "outer")
        try setAttribute(.main, "d/e", "user.dir", "inner")
        let overlay = try makeCachingOverlay()
        let e = try lookup(overlay, "d/e")
        _ = try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("new"), in: e.node)
        XCTAssertEqual(try lstatOf(.patch, "d/e").st_mode & S_IFMT, S_IFDIR, "copied up")
        let d = try lookup(overlay, "d")
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), d.node, name: n("user.dir")), n("outer"))
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), e.node, name: n("user.dir")), n("inner"))
        var value = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(lgetxattr(path(.patch, "d/e"), "user.dir", &value, value.count), 5, "on the copy itself")
    }
    /// A symlink or a FIFO copied up (by a change of owner) keeps its extended attributes: its
    /// own, not its target's, as kernel overlayfs copies them.
    func testCopiedUpSymlinkAndFIFOKeepTheirAttributes() throws {
        try write(.main, "target", "t")
        try setAttribute(.main, "target", "trusted.mark", "target")
        try symlink(.main, "link", to: "target")
        try setAttribute(.main, "link", "trusted.mark", "link")
        XCTAssertEqual(mkfifo(path(.main, "fifo"), 0o644), 0)
        try setAttribute(.main, "fifo", "trusted.mark", "fifo")
        let overlay = try makeCachingOverlay()
        var changes = Overlay.AttributeChanges()
        changes.uid = 1234
        for name in ["link", "fifo"] {
            _ = try overlay.setAttributes(Request(overlay), try lookup(overlay, name).node, changes, openFile: nil)
            XCTAssertEqual(try lstatOf(.patch, name).st_uid, 1234, "\(name) copied up")
        }
        var value = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(lgetxattr(path(.patch, "link"), "trusted.mark", &value, value.count), 4)
        XCTAssertEqual(Array(value.prefix(4)), n("link"))
        XCTAssertEqual(lgetxattr(path(.patch, "fifo"), "trusted.mark", &value, value.count), 4)
        XCTAssertEqual(Array(value.prefix(4)), n("fifo"))
        XCTAssertEqual(try overlay.extendedAttribute(Request(overlay), try lookup(overlay, "link").node, name: n("trusted.mark")), n("link"))
    }
}
