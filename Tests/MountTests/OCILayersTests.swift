import CSyscalls
import Foundation
import XCTest

/// The tests' OCI layer applier (Support/OCILayers.swift), on two layers made on disk: what it
/// makes is what the random-operation tests hold the substitution to.
final class OCILayersTests: XCTestCase {
    func testALayerDeletesReplacesAndMergesWithItsAttributes() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let lower = fx.root + "/lower", upper = fx.root + "/upper", applied = fx.root + "/applied"
        for name in ["f", "g", "h"] { try Disk.write(lower + "/d/" + name, "lower " + name) }
        try Disk.write(lower + "/x", "x")
        try Disk.write(upper + "/d/f", "upper f", mode: 0o600)
        XCTAssertEqual(lchown(upper + "/d/f", 7, 8), 0)
        try Disk.whiteout(upper + "/d", "g")
        try Disk.whiteout(upper, "x")
        try Disk.write(upper + "/d/a", "linked")
        XCTAssertEqual(link(upper + "/d/a", upper + "/d/b"), 0)
        XCTAssertEqual(lsetxattr(upper + "/d", "user.note", "1", 1, 0), 0)
        XCTAssertEqual(chmod(upper + "/d", 0o700), 0)
        try OverlayScenario.setTime(upper + "/d", 1_600_000_000, 5)

        try OCILayers.apply([lower, upper], into: applied)
        let tree = try OverlayTree.walk(applied)
        XCTAssertEqual(Set(tree.keys), ["", "d", "d/f", "d/h", "d/a", "d/b"])
        XCTAssertEqual(tree["d"]?.mode, 0o700)
        XCTAssertEqual(tree["d"]?.mtime, "1600000000.000000005")
        XCTAssertEqual(tree["d"]?.xattrs.count, 1)
        XCTAssertEqual(tree["d/f"].map { "\($0.mode) \($0.uid):\($0.gid)" }, "\(0o600) 7:8")
        XCTAssertEqual(try Disk.read(applied + "/d/f"), "upper f")
        XCTAssertEqual(try Disk.read(applied + "/d/h"), "lower h")
        XCTAssertEqual(tree["d/a"]?.nlink, 2)
        XCTAssertEqual(tree["d/a"]?.inode, tree["d/b"]?.inode)
    }

    func testANameBesideItsOwnWhiteoutIsADifference() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let lower = fx.root + "/lower", upper = fx.root + "/upper"
        try Disk.mkdir(lower + "/D")
        try Disk.mkdir(upper + "/D")
        try Disk.whiteout(upper, "D")
        let found = try OCILayers.differences([lower, upper], shown: lower, scratch: fx.root + "/applied")
        XCTAssertTrue(found.contains { $0.contains("holds both it and its whiteout .wh.D") }, "\(found)")
    }
}
