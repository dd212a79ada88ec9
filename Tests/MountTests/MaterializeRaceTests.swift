import Foundation
import XCTest

/// Renaming a directory with content below the substitution materializes it (Materialize.swift):
/// its visible tree is copied into the work directory, then put in its place. The kernel locks
/// only the rename's parents, so calls beneath the directory go on meanwhile. Found by
/// StressTests ("a/c/c: only in remount": a directory the layers held that the running mount
/// did not show). The copy is held at a known point: a lease on a main-bundle file that it
/// opens after the substitution's own entries are copied (those come first in its listing).
final class MaterializeRaceTests: XCTestCase {
    var fx: MountFixture!
    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Before the fix the removal was made in the tree the copy then replaced: the directory
    /// came back on disk, while the mount, which had looked it up since, remembered it missing.
    func testARemovalDuringTheCopyIsNotUndone() throws {
        try whileCopying("/bin/rmdir", [fx.inMount("top/sub/c")])
        XCTAssertNil(Disk.lstat(fx.inSubstitution("moved/sub/c")), "the directory removed is back in the layers")
    }

    /// Before the fix the new directory was made in the tree the copy then replaced: gone from
    /// the layers, while the mount still found it by name.
    func testADirectoryMadeDuringTheCopyIsKept() throws {
        try whileCopying("/bin/mkdir", [fx.inMount("top/sub/new")])
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("moved/sub/new")), "the directory made is gone from the layers")
    }

    /// Before the fix the main-bundle file was copied up, and written, in the tree the copy
    /// then replaced, which held its own copy of the file: the write was lost.
    func testAWriteDuringTheCopyIsKept() throws {
        try whileCopying("/bin/sh", ["-c", "printf ' and more' >> " + fx.inMount("top/sub/g")])
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("moved/sub/g"), encoding: .utf8), "main and more")
    }

    /// A file open for writing from before the rename keeps writing to the file its name shows.
    func testAFileOpenForWritingBeforeTheCopyKeepsWriting() throws {
        try Disk.write(fx.inMain("top/big"), "main")
        try Disk.write(fx.inMain("top/sub/g"), "main")
        try fx.start()
        let fd = open(fx.inMount("top/sub/g"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, "open: errno \(errno)")
        defer { close(fd) }
        XCTAssertEqual(rename(fx.inMount("top"), fx.inMount("moved")), 0, "rename: errno \(errno)")
        XCTAssertEqual(write(fd, " and more", 9), 9)
        XCTAssertEqual(try String(contentsOfFile: fx.inMount("moved/sub/g"), encoding: .utf8), "main and more")
        XCTAssertEqual(try String(contentsOfFile: fx.inSubstitution("moved/sub/g"), encoding: .utf8), "main and more")
    }

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

    /// Renames `top` to `moved` and runs `tool` with `arguments` while the copy waits; both
    /// must succeed, and the mount must then show what the layers hold. `top/sub` is in both
    /// layers: it is copied (the main bundle's `g` in it too) before the lease is met.
    private func whileCopying(_ tool: String, _ arguments: [String]) throws {
        try Disk.write(fx.inMain("top/big"), "main")
        try Disk.write(fx.inMain("top/sub/g"), "main")
        try Disk.mkdir(fx.inSubstitution("top/sub/c"))
        try fx.start()
        // looked up before: the rename holds the root's lock for its whole copy
        XCTAssertNotNil(Disk.lstat(fx.inMount("top/sub/c")))
        let lease = try Lease(fx.inMain("top/big"))
        defer { lease.release() }
        let mover = try lease.moveHeld(fx.inMount("top"), to: fx.inMount("moved"))
        let change = try Spawn.start(tool, arguments)
        try eventually("\(tool) is done or waits for the daemon") { KernelWait.isInTheDaemonOrDone(change) }
        // the names are looked up again: at once where the change is made already (the mount
        // then remembered the removed name missing); where it waits, the lookup waits for the
        // directory's lock that it holds
        let looker = try Spawn.start("/usr/bin/stat", ["top/sub/c", "top/sub/new"].map(fx.inMount), stderrPath: "/dev/null",
                                     stdoutPath: "/dev/null")
        try eventually("the lookups are done, or the change waits") {
            KernelWait.hasEnded(looker) || !KernelWait.hasEnded(change)
        }
        lease.release()
        XCTAssertEqual(Spawn.wait(mover, seconds: 20), 0, "mv")
        XCTAssertEqual(Spawn.wait(change, seconds: 20), 0, tool)
        XCTAssertNotNil(Spawn.wait(looker, seconds: 20), "stat")
        let layers = try MergedView.expected(main: fx.main, substitution: fx.substitution)
        let mount = try MergedView.walk(fx.mountpoint)
        XCTAssertEqual(MergedView.differences(layers, mount, "layers", "mount"), [])
    }
}
