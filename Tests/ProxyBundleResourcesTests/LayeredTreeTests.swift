import Foundation
import ProxyBundleResources
import XCTest

/// Layers merged in-process show what a mount of them shows (the mount tests compare the two
/// on the same layers); here, each rule of the merge on plain directories.
final class LayeredTreeTests: BundleTestCase {
    func testTheTopLayerWinsAndDirectoriesMerge() throws {
        let top = try tree(["a.txt": "top", "Images/new.png": "", "dir/": ""], "top")
        let main = try tree(["a.txt": "main", "b.txt": "main", "Images/old.png": "", "dir/inner.txt": ""], "main")
        let merged = try LayeredTree(paths: [top, main])
        XCTAssertEqual(merged.contents(of: "a.txt", limit: 100), Array("top".utf8))
        XCTAssertEqual(merged.contents(of: "b.txt", limit: 100), Array("main".utf8))
        XCTAssertEqual(merged.layer(of: "a.txt"), 0)
        XCTAssertEqual(merged.layer(of: "b.txt"), 1)
        XCTAssertEqual(merged.layers(at: "Images"), [0, 1])
        XCTAssertEqual(Set(merged.names(in: "Images")), ["new.png", "old.png"])
        XCTAssertEqual(Set(merged.names(in: "")), ["a.txt", "b.txt", "Images", "dir"])
        XCTAssertEqual(merged.kind(of: "dir/inner.txt"), .file)
        XCTAssertNil(merged.kind(of: "c.txt"))
    }

    func testWhiteoutsAndOpaqueDirectoriesHide() throws {
        let top = try tree(["Images/.wh.old.png": "", "Fonts/.wh..wh..opq": "", "Fonts/New.ttf": "", ".wh.b.txt": ""], "top")
        let main = try tree(["b.txt": "", "Images/old.png": "", "Images/kept.png": "", "Fonts/Old.ttf": ""], "main")
        let merged = try LayeredTree(paths: [top, main])
        XCTAssertNil(merged.kind(of: "b.txt"))
        XCTAssertFalse(merged.exists("Images/old.png"))
        XCTAssertEqual(merged.names(in: "Images"), ["kept.png"])
        XCTAssertEqual(merged.names(in: "Fonts"), ["New.ttf"])
        XCTAssertEqual(merged.layers(at: "Fonts"), [0])
        XCTAssertFalse(merged.names(in: "").contains(".wh.b.txt"), "whiteouts are never shown")
    }

    func testAWhiteoutDeviceHides() throws {
        let top = try directory("top")
        let main = try tree(["gone.txt": ""], "main")
        XCTAssertEqual(mknod(top + "/gone.txt", S_IFCHR | 0o600, 0), 0, "mknod needs root")
        let merged = try LayeredTree(paths: [top, main])
        XCTAssertFalse(merged.exists("gone.txt"))
        XCTAssertEqual(merged.names(in: ""), [])
    }

    func testSymlinksAreFollowedThroughTheMergedView() throws {
        let top = try tree(["Images/AppIcon.png": "->icon@2x.png", "Art": "->Images", "Abs.png": "->/proc/self/status"], "top")
        let main = try tree(["Images/icon@2x.png": "main icon"], "main")
        let merged = try LayeredTree(paths: [top, main])
        XCTAssertEqual(merged.kind(of: "Images/AppIcon.png"), .file, "a relative link to a file of a lower layer")
        XCTAssertEqual(merged.layer(of: "Images/AppIcon.png"), 0, "the link itself is the top layer's")
        XCTAssertEqual(merged.contents(of: "Art/AppIcon.png", limit: 100), Array("main icon".utf8))
        XCTAssertEqual(merged.kind(of: "Art"), .directory)
        XCTAssertEqual(merged.kind(of: "Abs.png"), .file, "an absolute link leads out of the tree")
    }

    func testOneLayerAndManyLayers() throws {
        let only = try tree(["a.txt": "", ".wh.b.txt": ""], "only")
        let single = try LayeredTree(paths: [only])
        XCTAssertEqual(single.layer(of: "a.txt"), 0)
        XCTAssertEqual(single.names(in: ""), ["a.txt"])
        let layers = try (0..<5).map { try tree(["l\($0).txt": "", "same.txt": "\($0)"], "layer\($0)") }
        let five = try LayeredTree(paths: layers)
        XCTAssertEqual(five.contents(of: "same.txt", limit: 10), Array("0".utf8))
        XCTAssertEqual(five.layer(of: "l4.txt"), 4)
        XCTAssertEqual(five.names(in: "").count, 6)
    }

    func testBadLayersAreRefused() throws {
        XCTAssertThrowsError(try LayeredTree(paths: [])) { XCTAssertEqual(($0 as? ResourceError)?.code, EINVAL) }
        XCTAssertThrowsError(try LayeredTree(paths: ["/nonexistent-pb-layer"])) {
            XCTAssertEqual(($0 as? ResourceError)?.code, ENOENT)
        }
        let one = try directory()
        XCTAssertThrowsError(try LayeredTree(paths: [one, one])) { XCTAssertEqual(($0 as? ResourceError)?.code, EINVAL) }
    }

    func testABundleResolvesOverLayers() throws {
        let patch = try tree(["Images/icon@2x.png": "patched"], "patch")
        let main = try tree(["Images/icon.png": "", "Images/icon@2x.png": "", "Images/icon@3x.png": ""], "main")
        let bundle = ResourceBundle(tree: try LayeredTree(paths: [patch, main]))
        XCTAssertEqual(bundle.resolve(ResourceQuery(name: "Images/icon", scale: 2)), "Images/icon@2x.png")
        XCTAssertEqual(bundle.tree.contents(of: "Images/icon@2x.png", limit: 100), Array("patched".utf8))
    }
}
