import Foundation
import ProxyBundleCore
import XCTest

/// No command hangs on a daemon that does not answer (stopped with SIGSTOP): each gives up
/// in bounded time, says so in one line, and names what clears it.
final class StuckDaemonTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        if let fx, fx.isRunning { kill(fx.daemon, SIGCONT) }
        fx?.tearDown()
    }

    /// Before the fix `mount` on the same mountpoint and `invalidate` blocked forever.
    func testCommandsGiveUpOnAStoppedDaemon() throws {
        try Disk.write(fx.inMain("file"), "main")
        try fx.start()
        kill(fx.daemon, SIGSTOP)
        let other = fx.root + "/other-patch"
        let commands: [[String]] = [
            ["mount", fx.main, fx.mountpoint, "--substitution", other],
            ["invalidate", fx.mountpoint],
            ["invalidate", fx.mountpoint, "some/path"],
            ["layers", fx.mountpoint],
            ["layers", fx.mountpoint, "--set"],
            ["which", fx.inMount("file")],
        ]
        for command in commands {
            let started = Date()
            let result = try Spawn.run(MountFixture.binary, command, seconds: 20)
            let took = Date().timeIntervalSince(started)
            XCTAssertEqual(result.status, 1, "\(command): \(result.output)")
            XCTAssertTrue(result.error.contains("not answer"), "\(command): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
            XCTAssertLessThan(took, MountFixture.commandPatience, "\(command) took \(took) s")
            XCTAssertTrue(result.error.contains("proxybundle unmount \(fx.mountpoint)"), "\(command): \(result.error)")
        }
        let unmount = try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint], seconds: 20)
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// A daemon that died is said to have died (before, `invalidate` called its mount "not a
    /// proxybundle mount"), with how to clear it.
    func testCommandsSayADeadDaemonDied() throws {
        try fx.start()
        kill(fx.daemon, SIGKILL)
        XCTAssertNotNil(fx.waitForExit(seconds: 10))
        for command in [["invalidate", fx.mountpoint], ["layers", fx.mountpoint], ["which", fx.mountpoint]] {
            let result = try Spawn.run(MountFixture.binary, command, seconds: 20)
            XCTAssertEqual(result.status, 1, "\(command)")
            XCTAssertEqual(result.error, "proxybundle: the daemon of \(fx.mountpoint) has died; "
                               + "clear the mount with: proxybundle unmount \(fx.mountpoint)\n", "\(command)")
        }
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint], seconds: 20).status, 0)
    }
}
