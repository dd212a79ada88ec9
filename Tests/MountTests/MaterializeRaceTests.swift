import Foundation
import XCTest

/// Renaming a directory with content below the substitution materializes it (Materialize.swift):
/// its visible tree is copied into the work directory, then put in its place. The kernel locks
/// only the rename's parents, so calls beneath the directory go on meanwhile. Found by
/// StressTests ("a/c/c: only in remount": a directory the layers held that the running mount
/// did not show).
final class MaterializeRaceTests: XCTestCase {
    var fx: MountFixture!
    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Before the fix the tree the copy replaced was removed before the daemon let go of what
    /// it had resolved there: a lookup in it meanwhile found the name missing and remembered
    /// it so (the kernel too), though the copy holds it. Names are looked up for the first
    /// time from the moment the copy takes the tree's place while that tree is removed, which
    /// takes a while for this many files.
    func testNamesLookedUpWhileTheReplacedTreeGoesAreFoundAfter() throws {
        let count = 4000
        try Disk.write(fx.inMain("top/big"), "main")
        for index in 0..<count { try Disk.write(fx.inSubstitution("top/sub/f\(index)"), "") }
        try fx.start()
        XCTAssertNotNil(Disk.lstat(fx.inMount("top/sub/f0")))  // the directory is looked in
        let before = Disk.lstat(fx.inSubstitution("top"))?.st_ino
        let mover = try Spawn.start("/bin/mv", [fx.inMount("top"), fx.inMount("moved")])
        try eventually("the copy takes the tree's place") {
            Disk.lstat(fx.inSubstitution("top")).map { $0.st_ino != before } ?? true || Spawn.exited(mover) != nil
        }
        for index in (1..<count).reversed() { _ = Disk.lstat(fx.inMount("top/sub/f\(index)")) }
        XCTAssertEqual(Spawn.wait(mover, seconds: 20), 0, "mv")
        let missing = (0..<count).filter { Disk.lstat(fx.inMount("moved/sub/f\($0)")) == nil }
        XCTAssertEqual(missing.count, 0, "names the mount says are missing, first: \(missing.prefix(5))")
    }
}
