import Foundation
import ProxyBundleCore
import XCTest

/// Guards of the mount command: one writer per substitution (bundles of the same name get
/// default substitutions of their own, a second writable mount of a substitution in use is
/// refused, a crashed daemon leaves no guard behind), and errors that name the real cause.
final class MountGuardTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        fx?.tearDown()
    }

    /// Before the fix `/x/A/Resources` and `/x/B/Resources` both defaulted to
    /// `~/.cache/proxybundle/Resources/patch`, and a file written through one mount showed in
    /// the other.
    func testBundlesOfTheSameNameGetSubstitutionsOfTheirOwn() throws {
        let home = fx.root + "/home"
        try Disk.mkdir(home)
        let environment = ["HOME=\(home)", "XDG_CACHE_HOME="]
        var substitutions: [String] = []
        for app in ["A", "B"] {
            let main = fx.root + "/\(app)/Resources", mountpoint = fx.root + "/mnt-\(app)"
            try Disk.write(main + "/Info.plist", app)
            try Disk.mkdir(mountpoint)
            let result = try proxybundle(["mount", main, mountpoint], environment: environment)
            XCTAssertEqual(result.status, 0, result.error)
            fx.otherMounts.append(mountpoint)
            let status = try proxybundle(["status", mountpoint, "--json"])
            let substitution = try XCTUnwrap(status.output.range(of: "\"substitution\":\"").map { range in
                String(status.output[range.upperBound...].prefix { $0 != "\"" })
            })
            XCTAssertTrue(substitution.hasPrefix(home + "/.cache/proxybundle/Resources-"), substitution)
            XCTAssertTrue(substitution.hasSuffix("/patch"), substitution)
            substitutions.append(substitution)
        }
        XCTAssertNotEqual(substitutions[0], substitutions[1])
        try Disk.write(fx.root + "/mnt-A/which.txt", "hi")
        XCTAssertEqual(Disk.lstatError(fx.root + "/mnt-B/which.txt"), ENOENT, "a file written through A shows in B")
        XCTAssertEqual(try Disk.read(substitutions[0] + "/which.txt"), "hi")
    }

    /// A second writable mount of a substitution in use is refused in one line naming the
    /// first; a read-only one is not. Once the first daemon is gone, even killed, a new
    /// writable mount takes the substitution.
    func testASecondWriterOfASubstitutionIsRefusedUntilTheFirstIsGone() throws {
        try Disk.write(fx.inMain("file"), "main")
        try fx.start()
        let other = fx.root + "/other-main", otherMount = fx.root + "/other-mnt"
        try Disk.write(other + "/file", "other")
        try Disk.mkdir(otherMount)
        for extra in [[], ["--foreground"]] {
            let refused = try proxybundle(["mount", other, otherMount, "--substitution", fx.substitution] + extra)
            XCTAssertEqual(refused.status, 1, "\(extra)")
            XCTAssertTrue(refused.error.contains("is already written by the mount at \(fx.mountpoint)"), refused.error)
            XCTAssertEqual(refused.error.split(separator: "\n").count, 1, refused.error)
            XCTAssertNil(MountTable.current().mount(at: otherMount), "mounted all the same")
        }
        let readOnly = try proxybundle(["mount", other, otherMount, "--substitution", fx.substitution, "-o", "ro"])
        XCTAssertEqual(readOnly.status, 0, readOnly.error)
        XCTAssertEqual(try proxybundle(["unmount", otherMount]).status, 0)

        kill(fx.daemon, SIGKILL)
        fx.stop()
        let taken = try proxybundle(["mount", other, otherMount, "--substitution", fx.substitution])
        XCTAssertEqual(taken.status, 0, "the killed daemon left its guard behind: \(taken.error)")
        fx.otherMounts.append(otherMount)
        try Disk.write(otherMount + "/new", "through the second mount")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new")), "through the second mount")
    }

    /// A substitution's lock that no mount holds is waited for, up to 2 s, when its holder is
    /// not a proxybundle daemon (the daemon of a mount just gone is waited for until it exits:
    /// `CycleMountTests`). Here a process that is no mount holds it until the mount command is
    /// seen waiting for it (the substitution open and the command asleep between two tries),
    /// then for good.
    func testASubstitutionLockNoMountHoldsIsWaitedFor() throws {
        try Disk.write(fx.inMain("file"), "main")
        let holder = open(fx.substitution, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertEqual(flock(holder, LOCK_EX | LOCK_NB), 0)
        let release = Release()
        let asked = Date()
        let errors = fx.root + "/mount.err"
        let command = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                      stderrPath: errors)
        try eventually("the mount command waits for the lock") {
            KernelWait.hasEnded(command) || KernelWait.channel(command) == "hrtimer_nanosleep"
                && Self.descriptors(of: command).contains(fx.substitution)
        }
        release.close(holder)
        let status = Spawn.wait(command, seconds: 30)
        let returned = Date()
        let waited = (status: status ?? -1, error: (try? Disk.read(errors)) ?? "")
        XCTAssertEqual(waited.status, 0, waited.error)
        fx.otherMounts.append(fx.mountpoint)
        let released = try XCTUnwrap(release.date, "the mount returned before the lock was let go")
        XCTAssertGreaterThanOrEqual(returned.timeIntervalSince(asked), released.timeIntervalSince(asked),
                                    "the mount took at least the time the lock was held")
        XCTAssertEqual(try Disk.read(fx.inMount("file")), "main")
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)

        let keeper = open(fx.substitution, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(keeper) }
        XCTAssertEqual(flock(keeper, LOCK_EX | LOCK_NB), 0)
        let started = Date()
        let refused = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(refused.status, 1)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.9, "waited for the lock")
        XCTAssertTrue(refused.error.contains("is already written by another proxybundle mount"), refused.error)
        XCTAssertEqual(refused.error.split(separator: "\n").count, 1, refused.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// A substitution directory on a proxybundle mount is refused in one line: that mount takes
    /// no `.wh.` names, so the outer one could record no deletion and no copy-up (before: the
    /// mount went ahead and every copy-up failed with EPERM). A read-only mount writes nothing
    /// there and goes ahead.
    func testASubstitutionOnAProxybundleMountIsRefused() throws {
        try fx.start()
        let other = fx.root + "/other-main", otherMount = fx.root + "/other-mnt"
        try Disk.write(other + "/file", "other")
        try Disk.mkdir(otherMount)
        try Disk.mkdir(fx.mountpoint + "/nested/patch")
        let refused = try proxybundle(["mount", other, otherMount, "--substitution", fx.mountpoint + "/nested/patch"])
        XCTAssertEqual(refused.status, 1, refused.error)
        XCTAssertTrue(refused.error.contains("is on the proxybundle mount at \(fx.mountpoint), which takes no .wh. names"),
                      refused.error)
        XCTAssertEqual(refused.error.split(separator: "\n").count, 1, refused.error)
        XCTAssertNil(MountTable.current().mount(at: otherMount), "mounted all the same")
        let readOnly = try proxybundle(["mount", other, otherMount, "--substitution", fx.mountpoint + "/nested/patch",
                                        "-o", "ro"])
        XCTAssertEqual(readOnly.status, 0, readOnly.error)
        fx.otherMounts.append(otherMount)
        XCTAssertEqual(try Disk.read(otherMount + "/file"), "other")
    }

    /// A main bundle under a directory the user cannot enter is reported as such, not as
    /// missing (before the fix: "does not exist").
    func testAMainBundleTheUserCannotReachIsSaidSo() throws {
        let locked = fx.root + "/locked"
        try Disk.write(locked + "/App/Info.plist", "x")
        XCTAssertEqual(chmod(locked, 0o700), 0)
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        let result = try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "env",
                                                        "HOME=\(fx.root)", MountFixture.binary, "mount", locked + "/App",
                                                        fx.mountpoint, "--substitution", fx.root + "/elsewhere"])
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.error.contains("main bundle \(locked)/App cannot be reached: Permission denied"), result.error)
        XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
    }

    /// A mountpoint that is not empty is mounted over with a warning that says what is hidden
    /// (before: without a word); mounting over the main bundle itself is the point, and quiet.
    func testANonEmptyMountpointIsMountedWithAWarning() throws {
        try Disk.write(fx.inMain("Info.plist"), "main")
        try Disk.write(fx.inMount("left-over.txt"), "hidden while mounted")
        // a log file: nothing else is said on stderr (without syslog, where the log goes would be)
        let log = ["--log-file", fx.root + "/daemon.log"]
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution] + log)
        XCTAssertEqual(result.status, 0, result.error)
        fx.otherMounts.append(fx.mountpoint)
        XCTAssertEqual(result.error, "proxybundle: warning: mountpoint \(fx.mountpoint) is not empty: its 1 entry is hidden while it is mounted\n")
        XCTAssertEqual(try Disk.list(fx.mountpoint), ["Info.plist"])
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        let over = try proxybundle(["mount", fx.main, fx.main, "--substitution", fx.substitution] + log)
        XCTAssertEqual(over.status, 0, over.error)
        fx.otherMounts.append(fx.main)
        XCTAssertEqual(over.error, "", "mounting over the main bundle itself warns of nothing")
    }

    /// Another user's mount (without allow_other) is said to be so by `status`, `which`,
    /// `invalidate` and `layers`, not "not answering (Permission denied)".
    func testAnotherUsersMountIsSaidToBeNotYours() throws {
        try Disk.write(fx.inMain("file"), "main")
        try fx.start()
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        func asNobody(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
            try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", MountFixture.binary] + arguments)
        }
        let status = try asNobody(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("state: another user's mount"), status.output + status.error)
        for command in [["which", fx.inMount("file")], ["invalidate", fx.mountpoint], ["layers", fx.mountpoint]] {
            let result = try asNobody(command)
            XCTAssertEqual(result.status, 1, "\(command)")
            XCTAssertEqual(result.error, "proxybundle: \(fx.mountpoint) is another user's mount (mounted without allow_other): not yours to use\n",
                           "\(command)")
        }
    }

    /// Paths given to the commands are bytes: `which` and `invalidate` take a name that is not
    /// UTF-8 as it was given (before: `which` said "in no layer", and `invalidate` exited 0
    /// having invalidated a name with U+FFFD in it). Layer paths that are not UTF-8: see
    /// ByteLayerPathTests.
    func testPathsThatAreNotUTF8() throws {
        try fx.start()
        let name = "$(printf 'caf\\351.txt')"
        func shell(_ command: String) throws -> (status: Int32, output: String, error: String) {
            try Spawn.run("/bin/bash", ["-c", "B='\(MountFixture.binary)'; M='\(fx.mountpoint)'; S='\(fx.substitution)'; "
                                            + "R='\(fx.root)'; " + command])
        }
        XCTAssertNotEqual(try shell("stat \"$M/\(name)\"").status, 0, "missing, and remembered so")
        XCTAssertEqual(try shell("printf 'dropped in' > \"$S/\(name)\"").status, 0)
        XCTAssertNotEqual(try shell("stat \"$M/\(name)\"").status, 0, "cached until invalidated")
        let invalidate = try shell("\"$B\" invalidate \"$M\" \"\(name)\"")
        XCTAssertEqual(invalidate.status, 0, invalidate.error)
        XCTAssertEqual(try shell("cat \"$M/\(name)\"").output, "dropped in", "the name as given was invalidated")
        let which = try shell("\"$B\" which \"$M/\(name)\" | cmp - <(printf 'substitution %s/caf\\351.txt\\n' \"$S\")")
        XCTAssertEqual(which.status, 0, which.output + which.error)
        let relative = try shell("cd \"$M\" && \"$B\" which \"\(name)\" | cmp - <(printf 'substitution %s/caf\\351.txt\\n' \"$S\")")
        XCTAssertEqual(relative.status, 0, relative.output + relative.error)
    }
}

/// When a descriptor was closed (its lock let go), for a test to compare with.
extension MountGuardTests {
    /// What `pid`'s open descriptors lead to.
    static func descriptors(of pid: pid_t) -> [String] {
        let directory = "/proc/\(pid)/fd"
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)
        }
    }
}

private final class Release: @unchecked Sendable {
    private let lock = NSLock()
    private var closed: Date?

    func close(_ fd: Int32) {
        lock.withLock {
            closed = Date()  // just before: the lock is let go no earlier
            _ = Glibc.close(fd)
        }
    }

    var date: Date? { lock.withLock { closed } }
}
