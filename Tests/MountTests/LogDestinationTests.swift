import Foundation
import ProxyBundleCore
import XCTest

/// Where a detached daemon's log goes, and that `status` says so.
final class LogDestinationTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() {
        _ = try? proxybundle(["unmount", fx.mountpoint])
        fx?.tearDown()
    }

    private func proxybundle(_ arguments: [String], environment: [String] = []) throws
        -> (status: Int32, output: String, error: String) {
        try Spawn.run(MountFixture.binary, arguments, environment: environment, seconds: 60)
    }

    /// Without a syslog daemon the log goes to a file under the state directory, said once on
    /// stderr; before, it vanished without a word.
    func testWithoutSyslogTheLogGoesToAFileAndStatusSaysWhere() throws {
        guard Disk.lstatError("/dev/log") == ENOENT else { throw XCTSkip("/dev/log exists: syslog is reachable here") }
        let state = fx.root + "/state"
        let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                    environment: ["XDG_STATE_HOME=\(state)"])
        XCTAssertEqual(mount.status, 0, mount.error)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: state + "/proxybundle")) ?? []
        XCTAssertEqual(files.count, 1, "\(files)")
        let log = state + "/proxybundle/" + (files.first ?? "")
        XCTAssertTrue(log.hasSuffix(".log") && files.first?.hasPrefix("mnt-") == true, log)
        XCTAssertEqual(mount.error, "proxybundle: syslog is not reachable (/dev/log: No such file or directory); "
                       + "the log goes to \(log)\n")
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("\n  log: \(log)\n"), status.output)
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint, "--json"]).output.contains("\"log\":\"\(log)\""))
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        let lines = try Disk.read(log)
        XCTAssertTrue(lines.contains("mounted \(fx.main)") && lines.contains("unmounted \(fx.mountpoint)"), lines)
    }

    /// A log that cannot go anywhere does not stop the mount: it says so, and logs nothing.
    func testAnUnwritableFallbackLogDoesNotStopTheMount() throws {
        guard Disk.lstatError("/dev/log") == ENOENT else { throw XCTSkip("/dev/log exists: syslog is reachable here") }
        try Disk.write(fx.root + "/state", "a file where the state directory would be")
        let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                    environment: ["XDG_STATE_HOME=\(fx.root)/state"])
        XCTAssertEqual(mount.status, 0, mount.error)
        XCTAssertTrue(mount.error.hasPrefix("proxybundle: syslog is not reachable (/dev/log: No such file or directory) and "
                                            + "cannot create log directory \(fx.root)/state/proxybundle: Not a directory"),
                      mount.error)
        XCTAssertTrue(mount.error.hasSuffix(": the daemon logs nothing (give --log-file)\n"), mount.error)
        XCTAssertTrue(fx.isMounted)
    }

    func testStatusNamesALogFileAndStandardError() throws {
        let log = fx.root + "/daemon.log"
        let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "--log-file", log])
        XCTAssertEqual(mount.status, 0, mount.error)
        XCTAssertEqual(mount.error, "", "nothing said of syslog when a file is given")
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint]).output.contains("\n  log: \(log)\n"))
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        try fx.start()
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint]).output.contains("\n  log: stderr\n"))
    }
}
