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
        let mover = try Spawn.start("/bin/mv", [fx.inMount("big"), fx.inMount("moved")])
        var progress = ""
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, Spawn.exited(mover) == nil {
            progress = try fx.stats()["materializing"] ?? ""
            if progress.hasPrefix("big (") && !progress.hasPrefix("big (0 ") { break }
            usleep(2_000)
        }
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
