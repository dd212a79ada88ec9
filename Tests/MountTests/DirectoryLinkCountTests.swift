import Foundation
import ProxyBundleCore
import XCTest

/// A directory's link count: a layer's own where one layer has the directory, 1 where several
/// are merged (no layer's count is right for it; 1 tells tools that count subdirectories by
/// it not to), as on kernel overlayfs of the same layers.
final class DirectoryLinkCountTests: XCTestCase {
    func testMergedDirectoriesCountOneLinkAsOnKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let patch = fx.root + "/patch1"
        for dir in ["d/sub1", "d/sub2", "only-main/x", "opaque/y"] { try Disk.mkdir(fx.inMain(dir)) }
        for dir in ["d/sub3", "only-substitution/z", "opaque"] { try Disk.mkdir(fx.inSubstitution(dir)) }
        try Disk.opaque(fx.inSubstitution("opaque"))
        try Disk.mkdir(patch + "/d/sub4")
        try Disk.mkdir(patch + "/only-patch/w")
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution, patch, fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try fx.start(patches: [patch])
        var compared = 0
        for dir in ["", "d", "d/sub1", "d/sub3", "d/sub4", "only-main", "only-substitution", "only-patch", "opaque"] {
            let ours = Disk.lstat(fx.inMount(dir)), theirs = Disk.lstat(kernel + (dir.isEmpty ? "" : "/" + dir))
            XCTAssertNotNil(ours, dir)
            XCTAssertEqual(ours?.st_nlink, theirs?.st_nlink, "link count of '\(dir)'")
            compared += 1
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("d"))?.st_nlink, 1, "merged from three layers")
        XCTAssertEqual(Disk.lstat(fx.inMount("only-main"))?.st_nlink, 3, "one layer's own count")
        // a listing's lookups (readdirplus) say the same as a lookup
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["d", "only-main", "only-patch", "only-substitution", "opaque"])
        XCTAssertEqual(Disk.lstat(fx.inMount("d"))?.st_nlink, 1)
        XCTAssertEqual(compared, 9)
    }
}
