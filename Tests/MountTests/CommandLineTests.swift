import Foundation
import ProxyBundleCore
import XCTest

/// The command line as a user meets it: detached mounts, unmount, errors, signals.
final class CommandLineTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func testDetachedMountReturnsOnceTheMountAnswersAndUnmountEndsTheDaemon() throws {
        try Disk.write(fx.inMain("hello"), "world")
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertTrue(fx.isMounted, "mounted when the command returned")
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.type, "fuse.proxybundle")
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.source, RawPath(fx.main))
        XCTAssertEqual(try Disk.read(fx.inMount("hello")), "world")
        let daemons = try daemonPIDs()
        XCTAssertEqual(daemons.count, 1, "one detached daemon serves \(fx.mountpoint)")

        let unmount = try proxybundle(["unmount", fx.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
        for pid in daemons { XCTAssertTrue(waitUntilGone(pid), "daemon \(pid) still running after unmount") }
    }

    func testUnmountClearsTheMountOfAKilledDaemon() throws {
        try fx.start()
        kill(fx.daemon, SIGKILL)
        XCTAssertNotNil(fx.waitForExit(seconds: 5))
        // the kernel drops the connection once the last reference to the daemon's /dev/fuse
        // goes: at its exit, or over io_uring some milliseconds later, when the rings'
        // commands are cancelled (a call meanwhile fails with ECONNABORTED or ECANCELED)
        var st = statvfs()
        var error: Int32 = 0
        let deadline = Date().addingTimeInterval(2)
        repeat {
            error = statvfs(fx.mountpoint, &st) == 0 ? 0 : errno
            if error != ENOTCONN { usleep(5_000) }
        } while error != ENOTCONN && Date() < deadline
        XCTAssertEqual(error, ENOTCONN)
        let again = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertNotEqual(again.status, 0)
        XCTAssertTrue(again.error.contains("proxybundle unmount"), again.error)
        let result = try proxybundle(["unmount", fx.mountpoint])
        XCTAssertEqual(result.status, 0, result.error)
        XCTAssertFalse(fx.isMounted)
    }

    func testSignalsUnmountCleanlyAndExitZero() throws {
        for signal in [SIGTERM, SIGINT, SIGHUP] {
            try fx.start()
            kill(fx.daemon, signal)
            XCTAssertEqual(fx.waitForExit(seconds: 10), 0, "exit status after signal \(signal): \(fx.log)")
            XCTAssertFalse(fx.isMounted, "still mounted after signal \(signal)")
            fx.stop()
        }
    }

    func testExternalUnmountEndsTheDaemon() throws {
        try fx.start()
        XCTAssertEqual(umount2(fx.mountpoint, 0), 0)
        XCTAssertEqual(fx.waitForExit(seconds: 10), 0, fx.log)
    }

    func testBadArgumentsGiveOneLineAndMountNothing() throws {
        try Disk.write(fx.root + "/plainfile", "x")
        let cases: [(arguments: [String], expect: String)] = [
            (["mount", fx.root + "/missing", fx.mountpoint, "--substitution", fx.substitution], "does not exist"),
            (["mount", fx.root + "/plainfile", fx.mountpoint, "--substitution", fx.substitution], "is not a directory"),
            (["mount", fx.main, fx.root + "/nowhere", "--substitution", fx.substitution], "does not exist"),
            (["mount", fx.main, fx.root + "/plainfile", "--substitution", fx.substitution], "is not a directory"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.root + "/plainfile"], "is not a directory"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.root + "/plainfile/patch"], "cannot be used: Not a directory"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "bogus"], "unknown mount option 'bogus'"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "entry_timeout=soon"], "entry_timeout"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "spin=soon"], "spin takes a number of microseconds"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "spin=1001"], "spin takes a number of microseconds"),
            (["mount", fx.main, fx.mountpoint, "--log-file", fx.root + "/log", "--syslog"], "give --log-file or --syslog, not both"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "substitution=" + fx.root + "/other"],
             "disagree; give one"),
            (["unmount", fx.mountpoint], "is not mounted"),
            (["mount", fx.main, "/proc", "--substitution", fx.substitution], "already a mount point"),
            (["mount", fx.main], "Missing expected argument"),
            (["mount", fx.main, fx.mountpoint, "--no-such-flag"], "Unknown option"),
            (["frobnicate"], "unknown command 'frobnicate'"),
            (["--serve-checked-mount"], "for proxybundle mount only"),
            (["--serve-checked-mount", fx.main, fx.mountpoint, fx.substitution, "loud", "stderr"], "for proxybundle mount only"),
            (["--serve-checked-mount", fx.main, fx.mountpoint, fx.substitution, "info", "stderr", "bogus"],
             "unknown mount option 'bogus'"),
            (["--serve-checked-mount", fx.root + "/missing", fx.mountpoint, fx.substitution, "info", "stderr"], "does not exist"),
        ]
        for (arguments, expect) in cases {
            let result = try proxybundle(arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.error.contains(expect), "\(arguments): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, "one line: \(result.error)")
            XCTAssertFalse(result.error.contains("Fatal error"), result.error)
            XCTAssertFalse(fx.isMounted, "\(arguments) left a mount")
        }
    }

    /// Layouts that would make the mount reach into itself are refused before anything is
    /// created or mounted.
    func testLoopingLayoutsAreRefusedUpFront() throws {
        try Disk.mkdir(fx.inMain("sub"))
        try Disk.mkdir(fx.inSubstitution("inner"))
        let cases: [(arguments: [String], expect: String)] = [
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.main], "is the main bundle itself"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.inMain("patch")], "inside the main bundle"),
            (["mount", fx.inMain("sub"), fx.mountpoint, "--substitution", fx.main], "inside the substitution"),
            (["mount", fx.inSubstitution("inner"), fx.mountpoint, "--substitution", fx.substitution], "is inside the substitution"),
            (["mount", fx.main, fx.inSubstitution("inner"), "--substitution", fx.substitution], "mountpoint"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.inMount("patch")], "inside the mountpoint"),
            (["mount", fx.main, fx.inMain("sub"), "--substitution", fx.substitution], "inside the main bundle"),
        ]
        for (arguments, expect) in cases {
            let result = try proxybundle(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertTrue(result.error.contains(expect), "\(arguments): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, "one line: \(result.error)")
            XCTAssertEqual(MountTable.current().mounts.filter { $0.mountpoint.description.hasPrefix(fx.root) }.count, 0, "\(arguments) mounted")
        }
        XCTAssertEqual(Disk.lstatError(fx.inMain("patch")), ENOENT, "nothing created in the main bundle")
        XCTAssertEqual(Disk.lstatError(fx.inMount("patch")), ENOENT)
    }

    /// `proxybundle mount APP APP`: tools that use the bundle's path see the merged view.
    func testMountingOverTheMainBundleItself() throws {
        try Disk.write(fx.inMain("Info.plist"), "main")
        try Disk.write(fx.inSubstitution("Info.plist"), "patched")
        let result = try proxybundle(["mount", fx.main, fx.main, "--substitution", fx.substitution])
        XCTAssertEqual(result.status, 0, result.error)
        defer { _ = try? proxybundle(["unmount", fx.main]); Unmounter.force(fx.main) }
        XCTAssertEqual(try Disk.read(fx.inMain("Info.plist")), "patched")
        try Disk.write(fx.inMain("new.txt"), "through the mount")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new.txt")), "through the mount")
        XCTAssertEqual(try proxybundle(["unmount", fx.main]).status, 0)
        XCTAssertEqual(try Disk.read(fx.inMain("Info.plist")), "main")
        XCTAssertEqual(Disk.lstatError(fx.inMain("new.txt")), ENOENT, "the bundle itself was not written")
    }

    func testSubstitutionIsCreatedWhenMissing() throws {
        let fresh = fx.root + "/cache/app/patch"
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fresh])
        XCTAssertEqual(result.status, 0, result.error)
        defer { _ = try? proxybundle(["unmount", fx.mountpoint]) }
        var st = stat()
        XCTAssertEqual(stat(fresh, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)
    }

    func testDefaultSubstitutionFollowsXDGCacheHome() throws {
        let cache = fx.root + "/xdg"
        let result = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint],
                                   environment: ["XDG_CACHE_HOME=\(cache)"])
        XCTAssertEqual(result.status, 0, result.error)
        defer { _ = try? proxybundle(["unmount", fx.mountpoint]) }
        let made = try Disk.list(cache + "/proxybundle")
        XCTAssertEqual(made.count, 1, "\(made)")
        let name = made.first ?? ""
        XCTAssertTrue(name.hasPrefix("main-") && name.count == 13 && name.dropFirst(5).allSatisfy(\.isHexDigit), name)
        var st = stat()
        XCTAssertEqual(stat(cache + "/proxybundle/" + name + "/patch", &st), 0)
    }

    func testHelpExplainsEveryCommandWithAnExample() throws {
        for command in [[], ["mount"], ["unmount"], ["invalidate"], ["status"], ["which"]] {
            let result = try proxybundle(command + ["--help"])
            XCTAssertEqual(result.status, 0)
            XCTAssertTrue(result.output.contains("Example"), "\(command): \(result.output)")
        }
        let mount = try proxybundle(["mount", "--help"])
        for word in ["--substitution", "--foreground", "--log-file", "--log-level", "--syslog", "entry_timeout", "allow_other",
                     "auto_unmount", "fsname", "nocache", "max_threads", "spin=", "MAIN".lowercased()] {
            XCTAssertTrue(mount.output.lowercased().contains(word.lowercased()), "mount --help lacks \(word)")
        }
    }

    /// Processes whose command line is a proxybundle mount of this fixture's mountpoint.
    private func daemonPIDs() throws -> [pid_t] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc").compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), let raw = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            let words = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            return words.contains("--serve-checked-mount") && words.contains(fx.mountpoint) ? pid : nil
        }
    }

    private func waitUntilGone(_ pid: pid_t) -> Bool {
        (try? eventually("process \(pid) ends") { kill(pid, 0) != 0 }) != nil
    }
}
