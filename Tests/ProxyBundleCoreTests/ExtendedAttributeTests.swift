import CFuseShim
import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Extended attributes come from the serving layer; the overlay's own are hidden.
final class ExtendedAttributeTests: OverlayTestCase {
    private func attributeNames(_ overlay: Overlay, _ node: NodeID) throws -> Set<String> {
        let bytes = try overlay.extendedAttributeNames(node)
        if !bytes.isEmpty { XCTAssertEqual(bytes.last, 0, "names are NUL-terminated") }
        return Set(bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) })
    }

    func testUserAttributeOfAMainFileIsVisible() throws {
        try write(.main, "f", "f")
        try setAttribute(.main, "f", "user.test", "hello")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        XCTAssertEqual(try overlay.extendedAttribute(f.node, name: n("user.test")), n("hello"))
        XCTAssertEqual(try attributeNames(overlay, f.node), ["user.test"])
        XCTAssertEqual(try overlay.extendedAttributeNames(f.node), n("user.test") + [0])
    }

    func testMissingAttributeIsNoData() throws {
        try write(.main, "f", "f")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        assertErrno(ENODATA, try overlay.extendedAttribute(f.node, name: n("user.absent")))
        XCTAssertEqual(try overlay.extendedAttributeNames(f.node), [])
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
        XCTAssertEqual(try overlay.extendedAttribute(f.node, name: n("user.both")), n("patch value"))
        assertErrno(ENODATA, try overlay.extendedAttribute(f.node, name: n("user.from-main")))
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
        XCTAssertEqual(try overlay.extendedAttribute(f.node, name: n("user.binary")), binary)
        XCTAssertEqual(try overlay.extendedAttribute(f.node, name: n("user.empty")), [])
        XCTAssertEqual(try overlay.extendedAttribute(f.node, name: n("user.big")), n(big))
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
            assertErrno(ENODATA, try overlay.extendedAttribute(res.node, name: n(name)), name)
        }
        XCTAssertEqual(try overlay.extendedAttribute(res.node, name: n("user.visible")), n("v"))
        XCTAssertEqual(try overlay.extendedAttribute(res.node, name: n("trusted.other")), n("t"))
        XCTAssertEqual(try attributeNames(overlay, res.node), ["user.visible", "trusted.other"])
    }

    func testOverlayAttributesOnTheRootAreHidden() throws {
        try setAttribute(.patch, "", "user.overlay.opaque", "n")
        try setAttribute(.patch, "", "user.root", "r")
        let overlay = try makeOverlay()
        assertErrno(ENODATA, try overlay.extendedAttribute(rootNodeID, name: n("user.overlay.opaque")))
        XCTAssertEqual(try attributeNames(overlay, rootNodeID), ["user.root"])
    }

    func testAttributesOfAMainOnlyDirectory() throws {
        try mkdir(.main, "d")
        try setAttribute(.main, "d", "user.dir", "main dir")
        let overlay = try makeOverlay()
        let d = try lookup(overlay, "d")
        XCTAssertEqual(try overlay.extendedAttribute(d.node, name: n("user.dir")), n("main dir"))
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
}
