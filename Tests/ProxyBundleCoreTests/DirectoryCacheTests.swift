@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The directory descriptors lookups go through are kept per directory node; one opened by a
/// path that a rename redirected between locating the node and opening it must not be kept.
final class DirectoryCacheTests: OverlayTestCase {
    /// Here the renames fall between `location(of:)` and `descriptors`, as a concurrent
    /// rename of an ancestor can. Before the fix: node a kept the descriptors of the
    /// directory that took its old name, and every later lookup in a resolved there (c/x
    /// answered with the attributes of b's x).
    func testDescriptorsOpenedByAnOutdatedPathAreNotKept() throws {
        try write(.patch, "a/x", "in a")
        try write(.patch, "b/x", "in directory b")
        let overlay = try makeCachingOverlay()
        let a = try lookup(overlay, "a").node
        _ = try lookup(overlay, "b")
        let located = overlay.nodes.version
        let outdated = try overlay.nodes.location(of: a)
        try overlay.rename(n("a"), in: rootNodeID, to: n("c"), in: rootNodeID, flags: 0)
        try overlay.rename(n("b"), in: rootNodeID, to: n("a"), in: rootNodeID, flags: 0)
        let served = try overlay.directories.descriptors(a, outdated, located: located, upper: overlay.upper,
                                                         lower: overlay.lower)
        XCTAssertGreaterThanOrEqual(served.upper, 0, "served once all the same")
        XCTAssertEqual(try lookup(overlay, "c").node, a)
        XCTAssertEqual(try lookup(overlay, "c/x").attributes.st_size, 4, "a's own x")
        XCTAssertEqual(try lookup(overlay, "a/x").attributes.st_size, 14, "b's x")
    }
}
