import Foundation
import XCTest

/// Workers poll for the next request before sleeping (`-o spin=`), which saves a wake-up per
/// request when a caller issues them back to back. Polling must cost nothing when nobody
/// calls, and almost nothing when callers pause longer than the poll lasts.
final class SpinTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }


    /// Looks up `count` names nobody has, `pause` microseconds apart: one request each.
    private func lookUpMissingNames(_ count: Int, prefix: String, pause: useconds_t = 0) {
        for index in 0..<count {
            XCTAssertEqual(Disk.lstatError(fx.inMount("\(prefix)\(index)")), ENOENT)
            if pause > 0 { usleep(pause) }
        }
    }

    func testTheMountAnswersWithPollingOffAndAtItsLongest() throws {
        for spin in ["0", "1000"] {
            try fx.start(["-o", "spin=\(spin)"])
            lookUpMissingNames(100, prefix: "missing-\(spin)-")
            try Disk.write(fx.inMount("made-\(spin)"), "content")
            XCTAssertEqual(try Disk.read(fx.inSubstitution("made-\(spin)")), "content")
            XCTAssertEqual(fx.stop(), 0, "spin=\(spin)")
        }
    }

    func testAnIdleDaemonUsesNoProcessorTime() throws {
        try fx.start(["-o", "spin=1000"])
        lookUpMissingNames(500, prefix: "burst-")
        try eventually("the daemon's threads sleep after the burst") { KernelWait.allThreadsSleep(fx.daemon) }
        let before = try fx.processorTicks()
        // the interval is what is measured: processor time used in an idle second, which
        // does not depend on how busy the machine is (a spinning thread would use it all)
        usleep(1_000_000)
        let used = try fx.processorTicks() - before
        XCTAssertLessThanOrEqual(used, 2, "ticks of processor time in an idle second")
    }

    /// Requests 4 ms apart never arrive within a 1 ms poll (the pause is the test's input: a
    /// busy machine only makes it longer). Without backing off, every one of
    /// 200 requests would be followed by 1 ms of polling: 20 ticks.
    func testPollingBacksOffWhenRequestsArriveFarApart() throws {
        try fx.start(["-o", "spin=1000"])
        let before = try fx.processorTicks()
        lookUpMissingNames(200, prefix: "paced-", pause: 4_000)
        let used = try fx.processorTicks() - before
        XCTAssertLessThan(used, 8, "ticks of processor time for 200 paced lookups")
    }
}
