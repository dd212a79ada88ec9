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

    /// What the daemon says of an unreachable /dev/log: refused (a socket nobody reads) on
    /// every machine, and missing where the machine has none (only there can it be missing).
    private func unreachableStates() -> [(reason: String, listening: Bool?)] {
        [("Connection refused", false)] + (DevLog.isMissing ? [("No such file or directory", nil)] : [])
    }

    /// Runs `body` with /dev/log as `listening` says (nil: left missing), then unmounts.
    private func withDevLog(_ listening: Bool?, _ body: () throws -> Void) throws {
        let devLog = try listening.map { try DevLog(in: fx.root, listening: $0) }
        defer {
            _ = try? proxybundle(["unmount", fx.mountpoint])
            devLog?.remove()
        }
        try body()
    }

    /// Without a syslog daemon the log goes to a file under the state directory, which says so
    /// in its first line, as `status` does; the mount's stderr stays quiet (a warning there on
    /// every mount broke the expected output of scripts such as xfstests' generic/062).
    func testWithoutSyslogTheLogGoesToAFileAndStatusSaysWhere() throws {
        for (index, state) in unreachableStates().enumerated() {
            try withDevLog(state.listening) { try checkFallbackLog(reason: state.reason, state: fx.root + "/state\(index)") }
        }
    }

    private func checkFallbackLog(reason: String, state: String) throws {
        let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                    environment: ["XDG_STATE_HOME=\(state)"])
        XCTAssertEqual(mount.status, 0, mount.error)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: state + "/proxybundle")) ?? []
        XCTAssertEqual(files.count, 1, "\(files)")
        let log = state + "/proxybundle/" + (files.first ?? "")
        XCTAssertTrue(log.hasSuffix(".log") && files.first?.hasPrefix("mnt-") == true, log)
        XCTAssertEqual(mount.error, "")
        let first = try Disk.read(log).split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertTrue(first.hasSuffix("syslog is not reachable (/dev/log: \(reason)); this mount logs here"), first)
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("\n  log: \(log) (syslog was not reachable)\n"), status.output)
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint, "--json"]).output.contains("\"log\":\"\(log)\""))
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        let lines = try Disk.read(log)
        XCTAssertTrue(lines.contains("mounted \(fx.main)") && lines.contains("unmounted \(fx.mountpoint)"), lines)
    }

    /// A log that cannot go anywhere does not stop the mount: it says so, and logs nothing.
    func testAnUnwritableFallbackLogDoesNotStopTheMount() throws {
        try Disk.write(fx.root + "/state", "a file where the state directory would be")
        for state in unreachableStates() {
            try withDevLog(state.listening) {
                let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                            environment: ["XDG_STATE_HOME=\(fx.root)/state"])
                XCTAssertEqual(mount.status, 0, mount.error)
                XCTAssertTrue(mount.error.hasPrefix("proxybundle: syslog is not reachable (/dev/log: \(state.reason)) and "
                                                    + "cannot create log directory \(fx.root)/state/proxybundle: Not a directory"),
                              mount.error)
                XCTAssertTrue(mount.error.hasSuffix(": the daemon logs nothing (give --log-file)\n"), mount.error)
                XCTAssertTrue(fx.isMounted)
            }
        }
    }

    /// With syslog listening, a detached daemon (and `--syslog` in the foreground) logs there,
    /// and says nothing of a fallback.
    func testWithSyslogListeningTheLogGoesThere() throws {
        let devLog = try DevLog(in: fx.root, listening: true)
        defer { devLog.remove() }
        let mount = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(mount.status, 0, mount.error)
        XCTAssertEqual(mount.error, "", "nothing said of a fallback")
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint]).output.contains("\n  log: syslog\n"))
        let mounted = devLog.receive { $0.contains("mounted \(fx.main)") }
        XCTAssertTrue(mounted.contains { $0.contains("proxybundle[") && $0.contains("mounted \(fx.main)") }, "\(mounted)")
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        XCTAssertTrue(devLog.receive { $0.contains("unmounted \(fx.mountpoint)") }.contains { $0.contains("unmounted \(fx.mountpoint)") })

        try fx.start(["--syslog"])
        XCTAssertTrue(try proxybundle(["status", fx.mountpoint]).output.contains("\n  log: syslog\n"))
        let foreground = devLog.receive { $0.contains("mounted \(fx.main)") }
        XCTAssertTrue(foreground.contains { $0.contains("proxybundle[\(fx.daemon)]") }, "\(foreground)")
        XCTAssertFalse(fx.log.contains("mounted \(fx.main)"), "--syslog: nothing on stderr: \(fx.log)")
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
