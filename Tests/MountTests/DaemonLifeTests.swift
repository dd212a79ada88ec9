import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// The daemon's life and its conventions: mount helper and fstab, unprivileged mounts,
/// status, which, logs, auto_unmount, and unmount waiting for the daemon.
final class DaemonLifeTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    private func mountDetached(_ extra: [String] = []) throws {
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution] + extra)
        XCTAssertEqual(result.status, 0, result.error)
        guard result.status == 0 else { throw TestFailure("mount failed: \(result.error)") }
    }

    /// The pid `.stats` reports, checked against the processes serving this mountpoint.
    private func daemonPID() throws -> pid_t {
        guard let pid = pid_t(try fx.stats()["pid"] ?? "") else { throw TestFailure(".stats has no pid") }
        let words = try String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8).split(separator: "\0")
        XCTAssertTrue(words.contains { $0 == fx.mountpoint }, "pid \(pid) is not the daemon of \(fx.mountpoint): \(words)")
        return pid
    }

    /// `mount --foreground` becomes the daemon by exec (same process) of a fresh image that
    /// never ran the argument parser, and a detached mount spawns that image directly.
    func testTheDaemonServesFromAFreshImageInTheProcessStarted() throws {
        try fx.start()
        let foreground = try String(contentsOfFile: "/proc/\(fx.daemon)/cmdline", encoding: .utf8).split(separator: "\0")
        XCTAssertEqual(foreground.dropFirst().first, "--serve-checked-mount", "\(foreground)")
        let name = try String(contentsOfFile: "/proc/\(fx.daemon)/comm", encoding: .utf8)
        XCTAssertEqual(name, "proxybundle\n", "what ps shows (not exe)")
        XCTAssertEqual(try daemonPID(), fx.daemon)
        XCTAssertFalse(try Disk.read(fx.inMount(".stats")).isEmpty)
        fx.tearDown()
        fx = try MountFixture(name)
        try mountDetached()
        let detached = try String(contentsOfFile: "/proc/\(try daemonPID())/cmdline", encoding: .utf8).split(separator: "\0")
        XCTAssertEqual(detached.dropFirst().first, "--serve-checked-mount", "\(detached)")
    }

    /// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
    private func hasExited(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(close, offsetBy: 2)] == "Z"
    }

    private func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        (try? eventually("", within: seconds, condition)) != nil
    }

    // MARK: mount helper

    /// `mount -t fuse.proxybundle` and an fstab line go through mount.fuse3, which runs
    /// `proxybundle MAIN MOUNTPOINT -o OPTIONS` found on the standard PATH.
    func testMountHelperAndFstabLine() throws {
        let installed = try HelperInstall()
        defer { installed.remove() }
        try Disk.write(fx.inMain("Info.plist"), "main")
        try Disk.write(fx.inSubstitution("Info.plist"), "patched")

        let helper = try Spawn.run("/bin/mount", ["-t", "fuse.proxybundle", fx.main, fx.mountpoint,
                                                  "-o", "substitution=\(fx.substitution),allow_other"])
        XCTAssertEqual(helper.status, 0, helper.error)
        let mount = MountTable.current().mount(at: fx.mountpoint)
        XCTAssertEqual(mount?.type, "fuse.proxybundle")
        XCTAssertEqual(mount?.source, RawPath(fx.main))
        XCTAssertEqual(try Disk.read(fx.inMount("Info.plist")), "patched")
        // as root, mount.fuse3 appends dev,suid; the mount is nosuid,nodev as `mount`'s are
        XCTAssertEqual(mountFlags() & (nosuid | nodev), nosuid | nodev)
        try Disk.write(fx.inMount("new"), "x")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new")), "x")
        let pid = try daemonPID()
        XCTAssertEqual(umount2(fx.mountpoint, 0), 0)
        XCTAssertTrue(waitUntil { hasExited(pid) }, "the helper-started daemon exits on umount")

        let fstab = fx.root + "/fstab"
        try Disk.write(fstab, "# proxybundle\n\(fx.main) \(fx.mountpoint) fuse.proxybundle defaults,substitution=\(fx.substitution),entry_timeout=5,x-systemd.requires=/,nofail 0 0\n")
        let all = try Spawn.run("/bin/mount", ["-a", "-T", fstab])
        XCTAssertEqual(all.status, 0, all.error)
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.type, "fuse.proxybundle")
        XCTAssertEqual(try Disk.read(fx.inMount("new")), "x")
        XCTAssertEqual(mountFlags() & (nosuid | nodev), nosuid | nodev)
        let unmount = try proxybundle(["unmount", fx.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
    }

    private let nosuid: UInt = 2, nodev: UInt = 4  // statvfs's ST_NOSUID, ST_NODEV

    private func mountFlags() -> UInt {
        var info = statvfs()
        return statvfs(fx.mountpoint, &info) == 0 ? info.f_flag : 0
    }

    /// The helper convention applies only to a path first: a mistyped command stays an error.
    func testHelperConventionDoesNotSwallowMistypedCommands() throws {
        let result = try proxybundle(["mout", fx.main, fx.mountpoint])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.error.contains("unknown command 'mout'"), result.error)
        XCTAssertFalse(fx.isMounted)
    }

    // MARK: unprivileged

    /// A user with access to /dev/fuse mounts through fusermount3 and unmounts again.
    func testUnprivilegedUserMountsAndUnmounts() throws {
        var device = stat()
        XCTAssertEqual(stat("/dev/fuse", &device), 0)
        XCTAssertEqual(chmod("/dev/fuse", 0o666), 0)
        defer { chmod("/dev/fuse", device.st_mode & 0o7777) }
        // the user needs its own copy of the binary and directories it can reach
        let binary = fx.root + "/proxybundle"
        try FileManager.default.copyItem(atPath: MountFixture.binary, toPath: binary)
        try Disk.write(fx.inMain("hello"), "main")
        for path in [fx.root, fx.main, fx.substitution, fx.mountpoint, fx.inMain("hello")] {
            XCTAssertEqual(chown(path, 65534, 65534), 0)
        }
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        let user = ["--reuid=65534", "--regid=65534", "--clear-groups", "env", "HOME=\(fx.root)", binary]
        func asUser(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
            try Spawn.run("/usr/bin/setpriv", user + arguments)
        }

        let mount = try asUser(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(mount.status, 0, mount.error)
        let info = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
            .split(separator: "\n").first { $0.contains(" \(fx.mountpoint) ") }
        XCTAssertTrue(info?.contains("user_id=65534") ?? false, "mounted by the user: \(info ?? "not mounted")")
        let write = try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
                                                      "cat '\(fx.inMount("hello"))' && echo new > '\(fx.inMount("made"))'"])
        XCTAssertEqual(write.status, 0, write.error)
        XCTAssertEqual(write.output, "main")
        var made = stat()
        XCTAssertEqual(stat(fx.inSubstitution("made"), &made), 0)
        XCTAssertEqual(made.st_uid, 65534)
        // root may not look into a mount without allow_other; the user reads its own status
        let status = try asUser(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("state: running"), status.output + status.error)
        let pidLine = status.output.split(separator: "\n").first { $0.hasPrefix("  pid: ") }
        guard let pid = pidLine.flatMap({ pid_t($0.dropFirst("  pid: ".count)) }) else {
            throw TestFailure("no pid in status: \(status.output)")
        }

        let unmount = try asUser(["unmount", fx.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
        XCTAssertTrue(hasExited(pid), "unmount returned before the daemon exited")

        // fusermount3's own reason for a refusal, also detached (before: a generic guess)
        let allowOther = try asUser(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "allow_other"])
        XCTAssertEqual(allowOther.status, 1)
        XCTAssertTrue(allowOther.error.contains("user_allow_other"), allowOther.error)
        XCTAssertFalse(allowOther.error.contains("is /dev/fuse accessible"), allowOther.error)
        XCTAssertEqual(allowOther.error.split(separator: "\n").count, 1, allowOther.error)
        XCTAssertFalse(fx.isMounted)

        // and an unreadable main bundle is refused with one line
        XCTAssertEqual(chown(fx.main, 0, 0), 0)
        XCTAssertEqual(chmod(fx.main, 0o700), 0)
        let refused = try asUser(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.error.contains("cannot be read"), refused.error)
        XCTAssertEqual(refused.error.split(separator: "\n").count, 1, refused.error)
        XCTAssertFalse(fx.isMounted)
    }

    // MARK: life cycle

    /// The daemon is held back from exiting: its log goes to a FIFO the test has filled, so
    /// its last log line ("unmounted") blocks until the test reads. `unmount` must not return
    /// before the daemon is gone.
    func testUnmountReturnsOnlyOnceTheDaemonHasExited() throws {
        let fifo = fx.root + "/log.fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        try mountDetached(["--log-file", fifo])
        let pid = try daemonPID()
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        XCTAssertGreaterThanOrEqual(writer, 0)
        let junk = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        while write(writer, junk, junk.count) > 0 {}
        close(writer)

        let unmount = try Spawn.start(MountFixture.binary, ["unmount", fx.mountpoint])
        XCTAssertTrue(waitUntil { !fx.isMounted }, "unmounted")
        // unmount waits for the daemon's exit in poll(2) on its pidfd: once it sleeps there
        // (or has ended, wrongly), whether it returned early shows
        try eventually("unmount waits for the daemon") {
            KernelWait.channel(unmount).contains("poll") || KernelWait.hasEnded(unmount)
        }
        XCTAssertNil(Spawn.exited(unmount), "unmount returned while the daemon was still running")
        XCTAssertFalse(hasExited(pid), "the daemon could not have exited yet")

        var buffer = [UInt8](repeating: 0, count: 65536)
        var status: Int32? = nil
        let finished = waitUntil {
            while read(reader, &buffer, buffer.count) > 0 {}
            status = Spawn.exited(unmount)
            return status != nil
        }
        XCTAssertTrue(finished, "unmount did not return after the daemon could exit")
        XCTAssertEqual(status, 0)
        XCTAssertTrue(hasExited(pid), "unmount returned before the daemon exited")
    }

    /// A daemon that does not answer (stopped here) is reported as such, and still unmounted.
    func testHungDaemonIsReportedAndStillUnmounted() throws {
        try mountDetached()
        let pid = try daemonPID()
        // the daemon is not the test's child: signalled through a pidfd, never by a pid that
        // another process may have by the time of the defer
        let daemon = pb_pidfd_open(pid)
        XCTAssertGreaterThanOrEqual(daemon, 0)
        defer {
            _ = pb_pidfd_send_signal(daemon, SIGKILL)  // ESRCH once it has exited
            close(daemon)
        }
        XCTAssertEqual(pb_pidfd_send_signal(daemon, SIGSTOP), 0)
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("state: not answering"), status.output)
        let unmount = try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint], seconds: 15)
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
        XCTAssertEqual(pb_pidfd_send_signal(daemon, SIGCONT), 0)
        XCTAssertTrue(waitUntil { hasExited(pid) }, "the daemon exits once it runs again")
    }

    /// A daemon that has mounted but cannot report ready in time (its log is a FIFO the test
    /// has filled, so its "mounted" line blocks) is stopped, its mount taken away, and the
    /// command says so. Before the fix the command said "the daemon exited before mounting"
    /// or waited for it for good. The deadline is the test's (`PROXYBUNDLE_READY_TIMEOUT`).
    func testADaemonThatMissesTheReadyDeadlineIsStoppedAndItsMountTakenAway() throws {
        let (mount, errors, reader) = try mountBlockedOnItsLog()
        defer { close(reader) }
        defer { for pid in daemons(of: fx.mountpoint) { kill(pid, SIGKILL) } }
        let daemon = daemons(of: fx.mountpoint)
        XCTAssertEqual(daemon.count, 1, "one daemon")
        guard let (status, error) = waitForMount(mount, errors: errors) else { return XCTFail("mount did not return") }
        XCTAssertEqual(status, 1, error)
        XCTAssertTrue(error.contains("did not report ready within 10 s and was stopped"), error)
        XCTAssertTrue(error.contains("PID \(daemon.first ?? 0)"), error)
        XCTAssertFalse(error.contains("exited before mounting"), error)
        XCTAssertEqual(error.split(separator: "\n").count, 1, error)
        XCTAssertFalse(fx.isMounted, "the daemon's mount is left behind")
        XCTAssertEqual(daemons(of: fx.mountpoint), [], "the daemon is left running")
        for pid in daemon { XCTAssertTrue(hasExited(pid)) }
    }

    /// A readiness deadline too large to count in milliseconds waits as long as it can, and
    /// the mount succeeds. Before the fix the command trapped on the overflow.
    func testAHugeReadyDeadlineMountsAsUsual() throws {
        let errors = fx.root + "/mount.err"
        let mount = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                    stderrPath: errors, environment: ["PROXYBUNDLE_READY_TIMEOUT=\(Int.max)"])
        guard let (status, error) = waitForMount(mount, errors: errors) else { return XCTFail("mount did not return") }
        XCTAssertEqual(status, 0, error)
        XCTAssertTrue(fx.isMounted)
    }

    /// The same failed start with another mount made over the daemon's since: a detach would
    /// take that one away (it takes the topmost), so the command leaves the mounts as they
    /// are. Before the fix it detached whatever was on top.
    func testAFailedStartTakesAwayNoMountButItsOwn() throws {
        let (mount, errors, reader) = try mountBlockedOnItsLog()
        defer { close(reader) }
        defer { for pid in daemons(of: fx.mountpoint) { kill(pid, SIGKILL) } }
        XCTAssertEqual(Glibc.mount("cover", fx.mountpoint, "tmpfs", 0, nil), 0, "tmpfs over the mount")
        defer {
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
        }
        guard let (status, error) = waitForMount(mount, errors: errors) else { return XCTFail("mount did not return") }
        XCTAssertEqual(status, 1, error)
        XCTAssertTrue(error.contains("did not report ready within 10 s"), error)
        let there = MountTable.current().mounts.filter { $0.mountpoint == RawPath(fx.mountpoint) }
        XCTAssertEqual(there.last?.type, "tmpfs", "the mount made over the daemon's is left where it was: \(there.map(\.type))")
        XCTAssertEqual(daemons(of: fx.mountpoint), [], "the daemon is left running")
    }

    /// Starts `mount` (its deadline 10 s) with its log going to a FIFO the test has filled,
    /// and returns once the daemon has mounted: its "mounted" line then blocks, so it never
    /// reports ready. Returns the command's pid, the file of its errors, and the FIFO's
    /// reader end that keeps the FIFO open (the caller closes it).
    private func mountBlockedOnItsLog() throws -> (pid_t, errors: String, reader: Int32) {
        let fifo = fx.root + "/log.fifo"
        guard mkfifo(fifo, 0o600) == 0 else { throw TestFailure("mkfifo: \(String(cString: strerror(errno)))") }
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        guard reader >= 0, writer >= 0 else { throw TestFailure("cannot open the FIFO") }
        let junk = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        while write(writer, junk, junk.count) > 0 {}
        close(writer)
        let errors = fx.root + "/mount.err"
        let mount = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                          "--log-file", fifo],
                                    stderrPath: errors, environment: ["PROXYBUNDLE_READY_TIMEOUT=10"])
        do {
            try eventually("the daemon mounts, then blocks on its log", within: 10) { fx.isMounted }
        } catch {
            close(reader)  // a daemon blocked on the FIFO gets EPIPE
            for pid in daemons(of: fx.mountpoint) + [mount] { kill(pid, SIGKILL) }
            throw error
        }
        return (mount, errors, reader)
    }

    /// The exit status of the `mount` command `pid` and what it wrote to `errors`; nil (the
    /// command killed) when it has not returned within 40 s.
    private func waitForMount(_ pid: pid_t, errors: String) -> (Int32, String)? {
        guard let status = Spawn.wait(pid, seconds: 40) else {
            kill(pid, SIGKILL)
            _ = Spawn.wait(pid, seconds: 5)
            return nil
        }
        return (status, (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
    }

    /// The processes serving `mountpoint` (the daemon image's command line names it).
    private func daemons(of mountpoint: String) -> [pid_t] { processes(of: mountpoint, marked: "--serve-checked-mount") }

    /// The processes watching `mountpoint` for auto_unmount (see `AutoUnmount`).
    private func watchers(of mountpoint: String) -> [pid_t] { processes(of: mountpoint, marked: "--auto-unmount-watch") }

    /// The running processes whose command line has `marker` and names `mountpoint`.
    private func processes(of mountpoint: String, marked marker: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { pid in
            guard let line = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8) else { return false }
            let words = line.split(separator: "\0")
            return !hasExited(pid) && words.contains { $0 == marker } && words.contains { $0 == mountpoint }
        }
    }

    func testAutoUnmountLeavesNoMountAfterSIGKILL() throws {
        try mountDetached(["-o", "auto_unmount"])
        let pid = try daemonPID()
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(waitUntil { !fx.isMounted }, "still mounted after the daemon was killed")
    }

    /// The requests waiting on the FUSE connection of the mount on the fixture's mountpoint
    /// (fusectl's `waiting`; fusectl is mounted where it is not, as `unmount` does).
    private func requestsWaiting(connection: String) -> Int {
        let connections = "/sys/fs/fuse/connections"
        if !FileManager.default.fileExists(atPath: connections + "/" + connection) {
            _ = Glibc.mount("fusectl", connections, "fusectl", 0, nil)
        }
        let text = (try? String(contentsOfFile: "\(connections)/\(connection)/waiting", encoding: .utf8)) ?? ""
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// The mount of a killed daemon goes away also when the kernel drops its connection only
    /// after someone has looked at the mount: the look, a request, then fails with
    /// ECONNABORTED instead of ENOTCONN. Made certain here: the test holds a copy of the
    /// daemon's /dev/fuse (pidfd_getfd), which keeps the connection up past the death until
    /// the test closes it, once a request waits on it. Before the fix fusermount3's
    /// auto_unmount made that look (an open) and, refused with ECONNABORTED, left the mount
    /// for good; over io_uring the kernel drops the connection late by itself.
    func testAutoUnmountAfterSIGKILLWithALookInFlight() throws {
        try mountDetached(["-o", "auto_unmount"])
        let pid = try daemonPID()
        XCTAssertEqual(daemons(of: fx.mountpoint), [pid], "the watcher is no second daemon")
        guard let device = MountTable.current().mount(at: fx.mountpoint)?.device,
              let connection = device.split(separator: ":").last.map(String.init) else { return XCTFail("no mount") }
        let daemon = pb_pidfd_open(pid)
        XCTAssertGreaterThanOrEqual(daemon, 0)
        defer { close(daemon) }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        let devices = fds.compactMap(Int32.init).filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == "/dev/fuse"
        }.map { pb_pidfd_getfd(daemon, $0) }
        var closed = false
        defer { if !closed { devices.forEach { close($0) } } }
        XCTAssertFalse(devices.isEmpty, "the daemon's /dev/fuse")
        XCTAssertFalse(devices.contains { $0 < 0 }, "pidfd_getfd: \(String(cString: strerror(errno)))")
        XCTAssertEqual(requestsWaiting(connection: connection), 0)

        XCTAssertEqual(pb_pidfd_send_signal(daemon, SIGKILL), 0)
        XCTAssertTrue(waitUntil { hasExited(pid) }, "the daemon exits")
        XCTAssertTrue(waitUntil { requestsWaiting(connection: connection) > 0 }, "nobody looked at the mount")
        devices.forEach { close($0) }
        closed = true
        XCTAssertTrue(waitUntil { !fx.isMounted }, "still mounted after the daemon was killed")
        XCTAssertTrue(waitUntil { watchers(of: fx.mountpoint).isEmpty }, "the watcher ends")
    }

    /// The watcher takes away only the daemon's own mount: one made over it since is left
    /// where it was, and so is the daemon's beneath it.
    func testAutoUnmountLeavesAMountMadeOverTheDaemonsAlone() throws {
        try mountDetached(["-o", "auto_unmount"])
        let pid = try daemonPID()
        let watcher = watchers(of: fx.mountpoint)
        XCTAssertEqual(watcher.count, 1, "one watcher")
        XCTAssertEqual(Glibc.mount("cover", fx.mountpoint, "tmpfs", 0, nil), 0, "tmpfs over the mount")
        defer {
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
        }
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(waitUntil { watcher.allSatisfy(hasExited) }, "the watcher ends")
        let there = MountTable.current().mounts.filter { $0.mountpoint == RawPath(fx.mountpoint) }
        XCTAssertEqual(there.map(\.type), ["fuse.proxybundle", "tmpfs"], "the mounts are left as they were")
    }

    /// The same with the mount on top dead too (a proxybundle mount without auto_unmount whose
    /// daemon was killed first): disconnected as the daemon's own would be, and still not the
    /// watcher's to take away (a detach takes the topmost mount).
    func testAutoUnmountLeavesADeadMountMadeOverTheDaemonsAlone() throws {
        try mountDetached(["-o", "auto_unmount"])
        let pid = try daemonPID()
        let watcher = watchers(of: fx.mountpoint)
        XCTAssertEqual(watcher.count, 1, "one watcher")
        // mounted beside it, then moved over it (`mount` refuses a mountpoint already mounted)
        let beside = fx.root + "/beside"
        try FileManager.default.createDirectory(atPath: beside, withIntermediateDirectories: false)
        let over = try proxybundle(["mount", fx.main, beside, "--no-substitution"])
        XCTAssertEqual(over.status, 0, over.error)
        let top = daemons(of: beside)
        defer { for daemon in top { kill(daemon, SIGKILL) } }
        defer {
            _ = umount2(beside, Int32(MNT_DETACH))
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
            _ = umount2(fx.mountpoint, Int32(MNT_DETACH))
        }
        XCTAssertEqual(Glibc.mount(beside, fx.mountpoint, nil, UInt(MS_MOVE), nil), 0, "move: \(String(cString: strerror(errno)))")
        XCTAssertEqual(top.count, 1, "the daemon of the mount on top")
        for daemon in top { XCTAssertEqual(kill(daemon, SIGKILL), 0) }
        XCTAssertTrue(waitUntil { top.allSatisfy(hasExited) }, "the daemon on top exits")
        // (over io_uring the kernel drops the connection a little after the death)
        XCTAssertTrue(waitUntil {
            var st = statvfs()
            return statvfs(fx.mountpoint, &st) == -1 && errno == ENOTCONN
        }, "the mount on top is disconnected")
        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(waitUntil { watcher.allSatisfy(hasExited) }, "the watcher ends")
        let there = MountTable.current().mounts.filter { $0.mountpoint == RawPath(fx.mountpoint) }
        XCTAssertEqual(there.map(\.type), ["fuse.proxybundle", "fuse.proxybundle"], "the mounts are left as they were")
    }

    /// The watcher holds nothing but the daemon's pidfd (not its log, not /dev/fuse, nothing in
    /// the mount): a plain unmount (not lazy) is not busy, and the watcher then just ends.
    func testAutoUnmountWatcherHoldsNothingAndLeavesACleanUnmountAlone() throws {
        let log = fx.root + "/daemon.log"
        try mountDetached(["-o", "auto_unmount", "--log-file", log])
        let watcher = watchers(of: fx.mountpoint)
        XCTAssertEqual(watcher.count, 1, "one watcher")
        for pid in watcher {
            // settled: asleep on the daemon's pidfd, having let go of what it inherited
            XCTAssertTrue(waitUntil { KernelWait.channel(pid).contains("poll") }, "the watcher waits in poll(2)")
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let targets = fds.sorted().map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) ?? "" }
            XCTAssertEqual(targets, ["/dev/null", "/dev/null", "/dev/null", "anon_inode:[pidfd]"])
            XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/cwd"), "/")
        }
        XCTAssertEqual(umount2(fx.mountpoint, 0), 0, "unmount: \(String(cString: strerror(errno)))")
        XCTAssertTrue(waitUntil { watcher.allSatisfy(hasExited) }, "the watcher ends")
        XCTAssertFalse(fx.isMounted)
    }

    // MARK: status

    func testStatusReportsEachMountAndADeadOne() throws {
        try Disk.write(fx.inMain("a"), "a")
        try mountDetached()
        _ = try Disk.read(fx.inMount("a"))
        let pid = try daemonPID()

        let text = try proxybundle(["status"])
        XCTAssertEqual(text.status, 0, text.error)
        let block = text.output.components(separatedBy: "\n\n").first { $0.hasPrefix(fx.mountpoint + "\n") } ?? ""
        for line in ["state: running", "main: \(fx.main)", "substitution: \(fx.substitution)", "pid: \(pid)", "uptime: ", "cached_nodes: "] {
            XCTAssertTrue(block.contains("  " + line), "status lacks '\(line)':\n\(text.output)")
        }

        let json = try proxybundle(["status", fx.mountpoint, "--json"])
        XCTAssertEqual(json.status, 0, json.error)
        let parsed = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]]
        XCTAssertEqual(parsed?.count, 1)
        let entry = parsed?.first ?? [:]
        XCTAssertEqual(entry["mountpoint"] as? String, fx.mountpoint)
        XCTAssertEqual(entry["main"] as? String, fx.main)
        XCTAssertEqual(entry["substitution"] as? String, fx.substitution)
        XCTAssertEqual(entry["pid"] as? Int, Int(pid))
        XCTAssertEqual(entry["state"] as? String, "running")
        XCTAssertNotNil(entry["uptime_seconds"] as? Int)
        let stats = entry["stats"] as? [String: Any]
        XCTAssertNotNil(stats?["misses"] as? Int, "figures are numbers: \(json.output)")

        XCTAssertEqual(kill(pid, SIGKILL), 0)
        XCTAssertTrue(waitUntil { hasExited(pid) })
        let dead = try proxybundle(["status", fx.mountpoint])
        XCTAssertEqual(dead.status, 0, dead.error)
        XCTAssertTrue(dead.output.contains("state: not connected"), dead.output)
        XCTAssertTrue(dead.output.contains("proxybundle unmount \(fx.mountpoint)"), dead.output)

        let notMount = try proxybundle(["status", fx.root])
        XCTAssertEqual(notMount.status, 1)
        XCTAssertTrue(notMount.error.contains("is not a proxybundle mount"), notMount.error)
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
    }

    // MARK: which

    func testWhichTellsTheServingLayer() throws {
        try Disk.write(fx.inMain("shadowed"), "main")
        try Disk.write(fx.inSubstitution("shadowed"), "patch")
        try Disk.write(fx.inMain("plain"), "main")
        try Disk.write(fx.inSubstitution("added"), "patch")
        try Disk.mkdir(fx.inMain("both"))
        try Disk.mkdir(fx.inSubstitution("both"))
        try Disk.write(fx.inMain("both/deleted"), "main")
        try Disk.write(fx.inSubstitution("both/.wh.deleted"), "")
        try Disk.mkdir(fx.inMain("replaced"))
        try Disk.write(fx.inMain("replaced/old"), "main")
        try Disk.mkdir(fx.inSubstitution("replaced"))
        try Disk.write(fx.inSubstitution("replaced/.wh..wh..opq"), "")
        try Disk.write(fx.inMain("lnk-target"), "t")
        XCTAssertEqual(symlink("lnk-target", fx.inSubstitution("link")), 0)
        try mountDetached()

        let cases: [(String, String)] = [
            ("shadowed", "substitution \(fx.inSubstitution("shadowed"))"),
            ("plain", "main \(fx.inMain("plain"))"),
            ("added", "substitution \(fx.inSubstitution("added"))"),
            ("both", "merged substitution \(fx.inSubstitution("both")) main \(fx.inMain("both"))"),
            ("both/deleted", "hidden by whiteout \(fx.inSubstitution("both/.wh.deleted"))"),
            ("replaced", "substitution \(fx.inSubstitution("replaced"))"),
            ("replaced/old", "hidden by opaque directory \(fx.inSubstitution("replaced"))"),
            ("link", "substitution \(fx.inSubstitution("link"))"),
            ("./both/../plain", "main \(fx.inMain("plain"))"),
            (".invalidate", "control file"),
            ("", "merged substitution \(fx.substitution) main \(fx.main)"),
        ]
        for (path, expected) in cases {
            let result = try proxybundle(["which", fx.inMount(path)])
            XCTAssertEqual(result.status, 0, "\(path): \(result.error)")
            XCTAssertEqual(result.output, expected + "\n", path)
        }
        // relative to the working directory, as a user types it
        let relative = try Spawn.run("/bin/sh", ["-c", "cd '\(fx.mountpoint)/both' && '\(MountFixture.binary)' which ../plain"])
        XCTAssertEqual(relative.output, "main \(fx.inMain("plain"))\n", relative.error)

        for (path, message) in [(fx.inMount("missing"), "is in no layer"), (fx.root + "/main/plain", "not inside a proxybundle mount"),
                                (fx.inMount("plain/below"), "cannot be resolved")] {
            let result = try proxybundle(["which", path])
            XCTAssertEqual(result.status, 1, path)
            XCTAssertTrue(result.error.contains(message), "\(path): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
        }
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
    }

    /// Mounted over the bundle itself, the main bundle's path is covered by the mount; `which`
    /// still names it (through the daemon's own descriptor of the covered directory).
    func testWhichOnAMountOverTheBundleItself() throws {
        try Disk.write(fx.inMain("plain"), "main")
        try Disk.write(fx.inSubstitution("added"), "patch")
        let result = try proxybundle(["mount", fx.main, fx.main, "--substitution", fx.substitution])
        XCTAssertEqual(result.status, 0, result.error)
        defer { _ = try? proxybundle(["unmount", fx.main]); Unmounter.force(fx.main) }
        XCTAssertEqual(try proxybundle(["which", fx.inMain("plain")]).output, "main \(fx.inMain("plain"))\n")
        XCTAssertEqual(try proxybundle(["which", fx.inMain("added")]).output, "substitution \(fx.inSubstitution("added"))\n")
        XCTAssertEqual(try proxybundle(["which", fx.inMain("nothing")]).status, 1)
    }

    // MARK: logs

    func testLogFileGetsFailedRequestsAtDebugLevel() throws {
        try Disk.mkdir(fx.inMain("full"))
        try Disk.write(fx.inMain("full/file"), "x")
        let log = fx.root + "/daemon-detached.log"
        try mountDetached(["--log-file", log, "--log-level", "debug"])
        XCTAssertEqual(rmdir(fx.inMount("full")), -1)
        XCTAssertEqual(errno, ENOTEMPTY)
        XCTAssertEqual(Glibc.mkdir(fx.inMount("empty"), 0o755), 0)
        XCTAssertEqual(Glibc.rename(fx.inMount("empty"), fx.inMount("full")), -1)
        XCTAssertEqual(errno, ENOTEMPTY)
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        let lines = try Disk.read(log).split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.contains("mounted \(fx.main)") }, "\(lines)")
        // each names the operation and the path, as libfuse's -d does
        XCTAssertTrue(lines.contains { $0.contains("debug") && $0.contains("\(fx.mountpoint): rmdir /full: ENOTEMPTY") },
                      "one line for the failed rmdir: \(lines)")
        XCTAssertTrue(lines.contains { $0.contains("rename /empty: ENOTEMPTY") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.contains("unmounted") }, "\(lines)")

        let bad = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                   "--log-file", fx.root + "/no/such/dir/log"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.error.contains("log file"), bad.error)
        XCTAssertEqual(bad.error.split(separator: "\n").count, 1, bad.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// Options that mount(8) passes along are accepted; unknown ones are still refused by name.
    func testMountCommandOptionsAreAcceptedUnknownOnesRefused() throws {
        try mountDetached(["-o", "rw,defaults,noauto,_netdev,x-gvfs-hide,comment=x"])
        XCTAssertTrue(fx.isMounted)
        XCTAssertEqual(try proxybundle(["unmount", fx.mountpoint]).status, 0)
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution, "-o", "rw,bogus=1"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.error.contains("unknown mount option 'bogus=1'"), result.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// Every file open through the mount is a descriptor in the daemon: one started with a
    /// low soft limit on open files (as services often get: 1,024) raises it to the hard
    /// limit. Before: with a soft limit of 128, the 104th simultaneous open failed with EMFILE.
    func testMoreFilesOpenAtOnceThanTheSoftLimitInherited() throws {
        let count = 300
        for index in 0..<count { try Disk.write(fx.inSubstitution("f\(index)"), "\(index)") }
        var mine = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &mine), 0)
        if mine.rlim_max < rlim_t(count * 2) {
            // the tests run as root: a hard limit too low is raised, not a reason to skip
            var raised = mine
            raised.rlim_max = rlim_t(count * 2)
            XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised), 0, "raise the hard limit: errno \(errno)")
            mine = raised
        }
        var low = mine
        low.rlim_cur = 128
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &low), 0)
        let started = Result { try fx.start() }
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &mine), 0)
        try started.get()
        var open: [Int32] = []
        defer { for fd in open { close(fd) } }
        for index in 0..<count {
            let fd = Glibc.open(fx.inMount("f\(index)"), O_RDONLY)
            XCTAssertGreaterThanOrEqual(fd, 0, "open #\(index + 1): errno \(errno)")
            guard fd >= 0 else { break }
            open.append(fd)
        }
        var buffer = [UInt8](repeating: 0, count: 8)
        for (index, fd) in open.enumerated() {
            let n = pread(fd, &buffer, buffer.count, 0)
            XCTAssertEqual(n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : "errno \(errno)", "\(index)")
        }
    }
}
