import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// A mount of a substitution right after `umount` of the one before (xfstests' cycle mount):
/// `umount` returns once the kernel let go of the mount, while that mount's daemon may still
/// be finishing a request and holds the substitution's writer lock until it exits. The new
/// mount waits for that exit, never refusing (it gave up after 2 s, and xfstests' generic/611,
/// 614, 615 and 618 failed on a busy machine); and a daemon lets go of the lock as soon as it
/// writes nothing more, before the rest of its exit.
final class CycleMountTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        fx?.tearDown()
    }

    /// The old daemon is held in a request (its open of a substitution file under a lease: the
    /// main bundle's files are read by the checks of every mount command the tests start) while
    /// its mount is detached: gone from the mount table, the daemon still serving. A new mount
    /// of the substitution waits (on a pidfd of that daemon) until the daemon has exited,
    /// however long, and then mounts. (It waited up to 2 s, then refused.)
    func testAMountWaitsForTheDaemonOfTheMountBefore() throws {
        try Disk.write(fx.inSubstitution("held"), "held")
        try fx.start()
        let lease = try Lease(fx.inSubstitution("held"))
        let output = fx.root + "/read.out"
        let reader = try Spawn.start("/bin/cat", [fx.inMount("held")], stdoutPath: output)
        try eventually("the old daemon opens the leased file") { lease.isWanted }
        XCTAssertEqual(umount2(fx.mountpoint, Int32(MNT_DETACH)), 0)

        let errors = fx.root + "/mount.err"
        let command = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution],
                                      stderrPath: errors)
        let old = fx.daemon
        try eventually("the mount command waits for the old daemon's exit") {
            KernelWait.hasEnded(command) || Self.watchesExit(of: old, from: command)
        }
        XCTAssertNil(Spawn.exited(command), "the mount gave up: \((try? Disk.read(errors)) ?? "")")
        XCTAssertTrue(fx.isRunning && fx.exited() == nil, "the old daemon is still serving")

        lease.release()
        XCTAssertEqual(Spawn.wait(reader, seconds: 30), 0)
        XCTAssertEqual(try Disk.read(output), "held")
        XCTAssertNotNil(fx.waitForExit(seconds: 30), "the old daemon ends once its last request is answered")
        XCTAssertEqual(Spawn.wait(command, seconds: 30), 0, (try? Disk.read(errors)) ?? "")
        fx.otherMounts.append(fx.mountpoint)
        try Disk.write(fx.inMount("new"), "through the new mount")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new")), "through the new mount")
    }

    /// The lock goes before the daemon's exit: here the daemon is held at its last log line
    /// ("unmounted", to a FIFO the test has filled), and the substitution can be locked.
    func testTheLockIsLetGoBeforeTheDaemonExits() throws {
        let fifo = fx.root + "/log.fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        try mount(["--log-file", fifo])
        let pid = try XCTUnwrap(pid_t(try fx.stats()["pid"] ?? ""))
        let writer = open(fifo, O_WRONLY | O_NONBLOCK)
        let junk = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        while write(writer, junk, junk.count) > 0 {}
        close(writer)

        XCTAssertEqual(umount2(fx.mountpoint, 0), 0, "errno \(errno)")
        try eventually("the lock is let go (or the daemon exited)") { lockable() || hasExited(pid) }
        XCTAssertFalse(hasExited(pid), "the daemon could not have exited: its log is full")
        var buffer = [UInt8](repeating: 0, count: 65536)
        try eventually("the daemon exits once its log is read") {
            while read(reader, &buffer, buffer.count) > 0 {}
            return hasExited(pid)
        }
    }

    /// Mount, write and remove files (a removed file's blocks are freed at its last close,
    /// which the daemon may make on its way out), `umount`, and mount again at once, over and
    /// over: never refused.
    func testRemountingAtOnceIsNeverRefused() throws {
        let chunk = [UInt8](repeating: 0xab, count: 1 << 20)
        for round in 0..<8 {
            try mount([])
            for index in 0..<50 { try Disk.write(fx.inMount("small-\(index)"), "\(round)") }
            let big = open(fx.inMount("big"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            XCTAssertGreaterThanOrEqual(big, 0)
            for _ in 0..<16 { XCTAssertEqual(write(big, chunk, chunk.count), chunk.count) }
            close(big)
            XCTAssertEqual(unlink(fx.inMount("big")), 0)
            XCTAssertEqual(umount2(fx.mountpoint, 0), 0, "round \(round): errno \(errno)")
        }
        try mount([])
        XCTAssertEqual(try Disk.read(fx.inMount("small-0")), "7")
    }

    private func mount(_ extra: [String]) throws {
        let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution]
                                     + extra + MountFixture.transportOptions)
        XCTAssertEqual(result.status, 0, result.error)
        guard result.status == 0 else { throw TestFailure("mount refused: \(result.error)") }
        fx.otherMounts.append(fx.mountpoint)
    }

    /// Whether the substitution's writer lock is free now (taken and let go at once).
    private func lockable() -> Bool {
        let fd = open(fx.substitution, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(fd) }
        return flock(fd, LOCK_EX | LOCK_NB) == 0
    }

    /// Whether `watcher` holds a pidfd of `pid` (fdinfo's `Pid:` line).
    static func watchesExit(of pid: pid_t, from watcher: pid_t) -> Bool {
        let directory = "/proc/\(watcher)/fdinfo"
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).contains { fd in
            let info = (try? String(contentsOfFile: directory + "/" + fd, encoding: .utf8)) ?? ""
            return info.split(separator: "\n").contains("Pid:\t\(pid)")
        }
    }

    private func hasExited(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(close, offsetBy: 2)] == "Z"
    }
}
