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
    /// ran to its end and the rename was made.
    func testCtrlCStopsTheRenameOfALargeDirectoryAndChangesNothing() throws {
        let count = 400
        for index in 0..<count { try Filler.dense(fx.inMain("big/f\(index)"), mebibytes: 1, stamp: index) }
        try fx.start()
        // opened before the rename, which holds the root's lock for its whole copy: a lookup of
        // .stats would wait for it, and the copy could end between two looks
        let stats = open(fx.inMount(".stats"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(stats, 0)
        defer { close(stats) }
        let mover = try Spawn.start("/bin/mv", [fx.inMount("big"), fx.inMount("moved")])
        var progress = ""
        var exited: Int32? = nil
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            exited = Spawn.exited(mover)
            if exited != nil { break }
            progress = try fx.stats(reading: stats)["materializing"] ?? ""
            if progress.hasPrefix("big (") && !progress.hasPrefix("big (0 ") { break }
            usleep(2_000)
        }
        // a process already reaped is never signalled: its pid may be another's by now
        guard exited == nil else { return XCTFail("mv ended (status \(exited ?? 0)) before its copy was seen in .stats") }
        XCTAssertTrue(progress.hasPrefix("big ("), "the copy's progress in .stats: '\(progress)'")
        let signalled = Date()
        kill(mover, SIGINT)
        let status = Spawn.wait(mover, seconds: 20)
        let took = Date().timeIntervalSince(signalled)
        XCTAssertNotNil(status, "mv still runs 20 s after Ctrl-C")
        XCTAssertLessThan(took, 3, "mv took \(took) s to stop after Ctrl-C")
        print("interrupted materialization: progress then '\(progress)', mv gone \(String(format: "%.3f", took)) s after SIGINT")
        XCTAssertEqual(Disk.lstatError(fx.inMount("moved")), ENOENT, "the rename was made")
        XCTAssertEqual(try Disk.list(fx.inMount("big")).count, count)
        XCTAssertEqual(try Disk.list(fx.substitution).filter { $0 != ".wh..wh.work" }, [], "a partial copy stays")
        XCTAssertEqual(Probe.workLeftovers(fx), [])
        XCTAssertEqual(try fx.stats()["materializing"], "none")
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
    }
}
