import Foundation
import ProxyBundleCore
import XCTest

/// The kernel notifier's worker may wait in the kernel when the daemon ends: a name's
/// invalidation waits for its directory's lock, and a request that holds it may never be read
/// once the daemon's loop has ended (SIGTERM). Its write holds the FUSE device open, so closing
/// the device no longer ends the connection: the daemon must end it itself.
final class NotifierShutdownTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// With PROXYBUNDLE_NO_EPOCH=1 the other spellings of a removed name are forgotten by the
    /// worker. The unlink is held in the daemon behind a rename whose copy waits for a lease;
    /// a lookup in the same directory waits for the directory's lock meanwhile, and takes it
    /// first once the unlink is answered, after SIGTERM: the loop reads it no more, and the
    /// worker's invalidation of a spelling waits behind it. A held open keeps the loop going
    /// until the worker is seen waiting. The daemon must still end.
    func testSignalEndsTheDaemonWhileTheNotifierWaitsForAnUnreadRequest() throws {
        for index in 0..<4 { try Disk.write(fx.inMain("big/f\(index)"), "f\(index)") }
        try Disk.write(fx.inMain("other/few"), "few")
        try Disk.write(fx.inMain("kept"), "kept")
        fx.environment = ["PROXYBUNDLE_NO_EPOCH=1"]
        try fx.start(["--log-level", "debug", "-o", "casefold", "-o", "transport=device"])
        for name in ["big", "kept", "other/few", "other/FEW", "other/Few"] { XCTAssertNotNil(Disk.lstat(fx.inMount(name))) }
        let daemon = fx.daemon
        var started: [pid_t] = []
        defer {
            // whatever happened, nothing waits for the mount once the test ends
            for pid in started { kill(pid, SIGKILL) }
            for pid in started { _ = Spawn.wait(pid, seconds: 20) }
        }

        let copied = try Lease(fx.inMain("big/f2"))
        defer { copied.release() }
        started.append(try copied.moveHeld(fx.inMount("big"), to: fx.inMount("moved")))
        let remover = try Spawn.start("/bin/rm", [fx.inMount("other/few")])
        started.append(remover)
        try eventually("the unlink waits in the daemon") { kernelStacks(remover).contains { $0.contains("fuse_unlink") } }
        let kept = try Lease(fx.inMain("kept"))
        defer { kept.release() }
        let keeper = try Spawn.start("/bin/cat", [fx.inMount("kept")])
        started.append(keeper)
        try eventually("the open waits for the lease") { kept.isWanted }
        let looker = try Spawn.start("/bin/cat", [fx.inMount("other/y")])
        started.append(looker)
        // waiting for the lock, in the walk (a lookup sent to the daemon would be further on)
        try eventually("the lookup waits for the directory") { kernelStacks(looker).contains { $0.hasPrefix("[<0>] path_openat+") } }

        XCTAssertEqual(kill(daemon, SIGTERM), 0)
        try eventually("the loop's idle threads are gone") {
            !signalPending(daemon, SIGTERM) && !kernelStacks(daemon).contains { $0.contains("fuse_dev_do_read") }
        }
        copied.release()
        try eventually("the notifier waits for the directory") {
            kernelStacks(daemon).contains { $0.contains("fuse_dev_write") && $0.contains("fuse_reverse_inval_entry") }
        }
        kept.release()
        let ended = fx.waitForExit(seconds: 20)
        XCTAssertNotNil(ended, "the daemon ends")
        if ended == nil { kill(looker, SIGKILL) }  // which lets the daemon end
        let statuses = started.map { Spawn.wait($0, seconds: 20) }
        started = []
        XCTAssertEqual(Array(statuses.dropLast()), [0, 0, 0], "the rename, the unlink and the held open were answered")
        XCTAssertNotEqual(statuses.last, 0, "the unread lookup failed")
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("other/.wh.few")), "the unlink was served")
    }

    /// Whether `signal` waits to be delivered to process `pid` (/proc/PID/status, ShdPnd).
    private func signalPending(_ pid: pid_t, _ signal: Int32) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ShdPnd:") }),
              let mask = UInt64(line.dropFirst("ShdPnd:".count).trimmingCharacters(in: .whitespaces), radix: 16) else { return false }
        return mask & (1 << UInt64(signal - 1)) != 0
    }
}
