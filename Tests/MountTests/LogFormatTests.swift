import Foundation
import ProxyBundleCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// What a log line says: the mount it is about, errors by their errno names with the path in
/// the mount; one timestamped format to a file or a terminal, the journal's priority prefix
/// without a time under systemd; and `-o debug` and `-o log_level=` for fstab and mount -t.
final class LogFormatTests: XCTestCase {
    private var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        try Disk.write(fx.inMain("d/file"), "x")
    }
    override func tearDown() { fx.tearDown() }

    /// A failed rmdir of a non-empty directory, which the daemon logs at debug level.
    private func failAnRmdir() {
        XCTAssertEqual(rmdir(fx.inMount("d")), -1)
        XCTAssertEqual(errno, ENOTEMPTY)
    }

    private func lines(containing text: String) -> [Substring] {
        fx.log.split(separator: "\n").filter { $0.contains(text) }
    }

    func testAFileGetsTimestampedLinesNamingTheMountAndTheErrnoName() throws {
        try fx.start(["-o", "log_level=debug"])
        failAnRmdir()
        let failed = lines(containing: "rmdir")
        XCTAssertEqual(failed.count, 1, fx.log)
        let pattern = #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d debug "# + NSRegularExpression.escapedPattern(for: fx.mountpoint)
            + #": rmdir /d: ENOTEMPTY$"#
        XCTAssertNotNil(failed.first.flatMap { $0.range(of: pattern, options: .regularExpression) }, fx.log)
        XCTAssertFalse(fx.log.contains("Directory not empty"), fx.log)
        let mounted = lines(containing: "mounted ")
        XCTAssertTrue(mounted.first?.contains(" info \(fx.mountpoint): mounted ") == true, fx.log)
    }

    /// Standard error is the journal's stream ($JOURNAL_STREAM names its device and inode):
    /// the level is the line's priority prefix, and there is no time of our own.
    func testUnderSystemdTheJournalGetsPrioritiesAndNoTime() throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: fx.logPath, contents: nil))
        var st = stat()
        XCTAssertEqual(stat(fx.logPath, &st), 0)
        fx.environment = ["JOURNAL_STREAM=\(st.st_dev):\(st.st_ino)"]
        try fx.start(["-o", "log_level=debug"])
        failAnRmdir()
        XCTAssertEqual(lines(containing: "rmdir"), ["<7>\(fx.mountpoint): rmdir /d: ENOTEMPTY"], fx.log)
        XCTAssertTrue(lines(containing: "mounted ").first?.hasPrefix("<6>\(fx.mountpoint): mounted ") == true, fx.log)
    }

    /// A JOURNAL_STREAM that is not standard error (it was redirected to a file) is ignored.
    func testAJournalStreamThatIsNotStandardErrorIsIgnored() throws {
        fx.environment = ["JOURNAL_STREAM=1:1"]
        try fx.start()
        XCTAssertTrue(lines(containing: "mounted ").first?.contains(" info \(fx.mountpoint): mounted ") == true, fx.log)
    }

    /// `-o debug`, as libfuse file systems take it: no detaching, debug level, to stderr.
    func testDebugOptionStaysInTheForegroundAndLogsDebugToStandardError() throws {
        let pid = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                        "-o", "debug"] + MountFixture.transportOptions,
                                  stderrPath: fx.logPath, environment: ["PROXYBUNDLE_EXIT_WITH_PARENT=1"])
        defer {
            kill(pid, SIGTERM)
            _ = Spawn.wait(pid, seconds: 10)
        }
        try fx.waitForMount()
        failAnRmdir()
        XCTAssertNil(Spawn.exited(pid), "the command stays: the daemon runs in it")
        XCTAssertEqual(lines(containing: "rmdir").count, 1, fx.log)
        XCTAssertTrue(lines(containing: "rmdir").first?.hasSuffix("debug \(fx.mountpoint): rmdir /d: ENOTEMPTY") == true, fx.log)
    }

    func testBadOrConflictingLogLevelsAreOneLine() throws {
        let bad = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "-o", "log_level=loud"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertEqual(bad.error, "proxybundle: log_level takes trace, debug, info, notice, warning, error, critical, not 'loud'\n")
        let both = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--log-level", "info", "-o", "debug"])
        XCTAssertEqual(both.status, 1)
        XCTAssertEqual(both.error, "proxybundle: --log-level info and -o debug disagree; give one\n")
        XCTAssertFalse(fx.isMounted)
    }
}
