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
        let outdated = try overlay.nodes.location(of: a, in: overlay.nodes.generation)
        try overlay.rename(Request(overlay), n("a"), in: rootNodeID, to: n("c"), in: rootNodeID, flags: 0)
        try overlay.rename(Request(overlay), n("b"), in: rootNodeID, to: n("a"), in: rootNodeID, flags: 0)
        let served = try overlay.current.directories.descriptors(a, outdated, located: located, layers: overlay.currentLayers)
        XCTAssertGreaterThanOrEqual(served[0], 0, "served once all the same")
        XCTAssertEqual(try lookup(overlay, "c").node, a)
        XCTAssertEqual(try lookup(overlay, "c/x").attributes.st_size, 4, "a's own x")
        XCTAssertEqual(try lookup(overlay, "a/x").attributes.st_size, 14, "b's x")
    }

    /// Materializing a directory replaces every substitution directory beneath it by a copy,
    /// while their nodes keep their placement. Before the fix, b kept the descriptors of the
    /// removed original: a name never looked up there was missing, and b's attributes were
    /// those of a removed directory (size 0).
    func testDescriptorsOfDirectoriesReplacedByMaterializingAreNotKept() throws {
        try write(.main, "a/m", "main")
        try write(.patch, "a/b/f", "looked up")
        try write(.patch, "a/b/g", "never looked up")
        let overlay = try makeCachingOverlay()
        let b = try lookup(overlay, "a/b").node
        _ = try lookup(overlay, "a/b/f")
        let a = try lookup(overlay, "a").node
        try overlay.rename(Request(overlay), n("a"), in: rootNodeID, to: n("c"), in: rootNodeID, flags: 0)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: a).st_nlink, 3, "materialized")
        XCTAssertEqual(try lookup(overlay, "c/b/g").attributes.st_size, 15)
        XCTAssertEqual(try overlay.attributes(Request(overlay), of: b).st_size, try lstatOf(.patch, "c/b").st_size)
        XCTAssertGreaterThan(try overlay.attributes(Request(overlay), of: b).st_size, 0)
    }

    /// d in both layers, its descriptors opened while the substitution's copy was away (moved
    /// behind the daemon's back, or by a racing rename), which then came back.
    private func overlayWithDescriptorsOpenedWhileAway() throws -> (Overlay, d: NodeID) {
        try write(.main, "d/m", "main")
        try write(.patch, "d/p", "patch")
        let overlay = try makeCachingOverlay()
        let d = try lookup(overlay, "d").node
        let location = try overlay.nodes.location(of: d, in: overlay.nodes.generation)
        try rename(.patch, "d", "away")
        let opened = try overlay.current.directories.descriptors(d, location, located: overlay.nodes.version,
                                                         layers: overlay.currentLayers)
        XCTAssertEqual(opened[0], -1, "fixture: opened while away")
        try rename(.patch, "away", "d")
        return (overlay, d)
    }

    /// A directory's attributes come through its kept descriptors, which have none for a
    /// layer the directory was away from. Before the fix: EBADF (fstat of -1).
    func testAttributesOfADirectoryAwayWhenItsDescriptorsWereOpenedComeByPath() throws {
        let (overlay, d) = try overlayWithDescriptorsOpenedWhileAway()
        let st = try overlay.attributes(Request(overlay), of: d)
        XCTAssertEqual(fileType(st), S_IFDIR)
        XCTAssertEqual(st.st_mtim.tv_nsec, try lstatOf(.patch, "d").st_mtim.tv_nsec)
    }

    /// Descriptors that miss a layer the directory's placement names serve once and are not
    /// kept. Before the fix they were: the names of that layer stayed unseen (d/p missing)
    /// until an invalidation.
    func testDescriptorsMissingALayerAreNotKept() throws {
        let (overlay, _) = try overlayWithDescriptorsOpenedWhileAway()
        XCTAssertEqual(try lookup(overlay, "d/p").attributes.st_size, 5)
    }

    /// A walk lists a directory, then each of its subdirectories in turn, each looked up from
    /// the listing (readdirplus). When they fill the cache, the directory walked stays (each
    /// subdirectory's opening uses it), and with it its names by layer: every subdirectory is
    /// opened only in the layers that hold it. Before the fix the full cache was emptied whole,
    /// and each subdirectory listed after that was opened in every layer of the stack (in a
    /// walk of 1,000 patches, 49,000 failed opens).
    func testAFullCacheKeepsTheDirectoryAWalkIsIn() throws {
        let base = try makeTemporaryDirectory("many")
        // more than the cache keeps of directories in every layer (14 descriptors each)
        let subdirectories = DirectoryCache.limit(descriptors: 14, layers: 14) + 10
        var patches: [Layer] = []
        for index in 0..<12 {
            for sub in 0..<subdirectories {
                try FileManager.default.createDirectory(atPath: base + "/\(index)/top/s\(sub)", withIntermediateDirectories: true)
            }
            patches.append(try Layer(path: base + "/\(index)"))
        }
        let overlay = try Overlay(main: Layer(path: mainRoot), patches: patches, substitution: Layer(path: patchRoot),
                                  writable: false, cachesLookups: true)
        let top = try lookup(overlay, "top").node
        let listing = try overlay.listDirectory(Request(overlay), top)
        XCTAssertGreaterThan(subdirectories, DirectoryCache.limit(descriptors: patches.count + 2, layers: patches.count + 2),
                             "fixture: the cache fills")
        for (name, item) in listing.named where name.first != UInt8(ascii: ".") {
            let sub = try overlay.lookup(Request(overlay), listed: item, in: listing).node
            XCTAssertTrue(try overlay.listDirectory(Request(overlay), sub).directories.isFiltered,
                          "\(String(decoding: name, as: UTF8.self)) opened where top's names say")
        }
        let placement = try XCTUnwrap(overlay.nodes.placement(of: top))
        XCTAssertNotNil(overlay.current.directories.cached(top, placement), "top kept")
    }
}
