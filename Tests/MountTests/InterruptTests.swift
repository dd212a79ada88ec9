import Foundation
import ProxyBundleCore
import XCTest

/// Long operations honour the caller's signal: the kernel sends FUSE_INTERRUPT, the copy
/// stops, what it made is removed, and nothing changed. Their progress shows in `.stats`.
final class InterruptTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Before the fix Ctrl-C could not stop `mv` of a large main-bundle directory: the copy
    /// ran to its end and the rename was made. The copy is held at a known point, a lease on
    /// one of the files that the daemon's open of it waits for; the signal comes while it
    /// waits, and the copy goes on once the daemon has the interrupt, so nothing depends on
    /// how fast the machine copies.
    func testCtrlCStopsTheRenameOfALargeDirectoryAndChangesNothing() throws {
        let count = 40
        for index in 0..<count { try Filler.dense(fx.inMain("big/f\(index)"), mebibytes: 1, stamp: index) }
        try fx.start()
        // opened before the rename, which holds the root's lock for its whole copy: a lookup of
        // .stats would wait for it
        let stats = open(fx.inMount(".stats"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(stats, 0)
        defer { close(stats) }
        let lease = try Lease(fx.inMain("big/f\(count / 2)"))
        defer { lease.release() }
        let mover = try lease.moveHeld(fx.inMount("big"), to: fx.inMount("moved"))
        let progress = try fx.stats(reading: stats)["materializing"] ?? ""
        XCTAssertTrue(progress.hasPrefix("big ("), "the copy's progress in .stats: '\(progress)'")
        // mv waits for the rename's answer (it cannot end before it), so its pid is its own
        kill(mover, SIGINT)
        try eventually("the daemon has the interrupt") {
            try fx.stats(reading: stats)["interrupted_requests"] == "1"
        }
        let released = Date()
        lease.release()
        let status = Spawn.wait(mover, seconds: 20)
        let took = Date().timeIntervalSince(released)
        XCTAssertNotNil(status, "mv still runs 20 s after Ctrl-C")
        XCTAssertLessThan(took, 3, "mv took \(took) s to stop once the copy went on")
        print("interrupted materialization: progress then '\(progress)', mv gone \(String(format: "%.3f", took)) s after the copy went on")
        XCTAssertEqual(Disk.lstatError(fx.inMount("moved")), ENOENT, "the rename was made")
        XCTAssertEqual(try Disk.list(fx.inMount("big")).count, count)
        XCTAssertEqual(try Disk.list(fx.substitution).filter { $0 != ".wh..wh.work" }, [], "a partial copy stays")
        XCTAssertEqual(Probe.workLeftovers(fx), [])
        XCTAssertEqual(try fx.stats()["materializing"], "none")
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
    }
}
