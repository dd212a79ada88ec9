import Foundation
import ProxyBundleCore
import XCTest

/// A reply to an open or a create that never reaches the kernel leaves nothing open in the
/// daemon (no descriptor, no passthrough backing), as libfuse's high-level layer releases the
/// file then; nor does a readdirplus reply keep the lookups its entries counted. On this kernel a signal does not make such a reply fail (the caller waits for a
/// request the daemon has read, even when killed); the connection ending does: an abort
/// (fusectl, or a request that outlived the kernel's request timeout) while the daemon serves
/// the request.
final class UndeliveredReplyTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// An open held by a lease on the main-bundle file, and a create held behind a rename that
    /// materializes a directory (which holds every change off until its copy is done, itself
    /// held by a lease); the connection is aborted, then both go on and their replies fail. A
    /// third open, still held, keeps the daemon alive meanwhile (its loop waits for every
    /// request in hand before it ends), so that its descriptors can be counted: the layers'
    /// files it holds are those it held before. A passthrough backing keeps the daemon's open
    /// file in the kernel once the descriptor is closed: that the layer's file can be leased
    /// again (a write lease wants no other open) shows its backing is gone too. Over
    /// /dev/fuse: over io_uring the reply is given to the ring once the handler has returned
    /// (see Uring.c).
    func testRepliesThatNeverReachTheKernelLeaveNoDescriptor() throws {
        try Disk.write(fx.inMain("opened"), "opened")
        try Disk.write(fx.inMain("kept"), "kept")
        for index in 0..<4 { try Disk.write(fx.inMain("big/f\(index)"), "f\(index)") }
        try Disk.mkdir(fx.inMain("other"))
        try fx.start(["--log-level", "debug", "-o", "transport=device"])
        for name in ["opened", "kept", "big", "other"] { XCTAssertNotNil(Disk.lstat(fx.inMount(name))) }
        // the kernel then remembers the name missing, and creating it sends CREATE alone
        XCTAssertEqual(Disk.lstatError(fx.inMount("other/new")), ENOENT)
        let before = try regularFiles()

        let opened = try Lease(fx.inMain("opened"))
        defer { opened.release() }
        let reader = try held(opened, "/bin/cat", [fx.inMount("opened")])
        let copied = try Lease(fx.inMain("big/f2"))
        defer { copied.release() }
        let mover = try copied.moveHeld(fx.inMount("big"), to: fx.inMount("moved"))
        let creator = try Spawn.start("/bin/sh", ["-c", "echo new > \(fx.inMount("other/new"))"])
        try eventually("the create waits for the daemon's answer") { blockedInOpen(creator) }
        let kept = try Lease(fx.inMain("kept"))
        defer { kept.release() }
        let keeper = try held(kept, "/bin/cat", [fx.inMount("kept")])

        guard let mount = MountTable.current().mount(at: fx.mountpoint) else { return XCTFail("not mounted") }
        Unmounter.abortConnection(device: mount.device)
        opened.release()
        try eventually("the open's reply failed") { fx.log.contains("open: reply not delivered") }
        try eventually("the open's descriptor is closed") { try regularFiles() == before }
        try eventually("the open's backing is closed") { opened.isSoleOpen }
        copied.release()
        try eventually("the create's reply failed") { fx.log.contains("create: reply not delivered") }
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("other/new")), "the create was served")
        try eventually("the create's descriptor is closed") { try regularFiles() == before }
        try eventually("the create's backing is closed") { (try? Lease(fx.inSubstitution("other/new"))) != nil }

        kept.release()
        for pid in [reader, mover, creator, keeper] { XCTAssertNotNil(Spawn.wait(pid, seconds: 20)) }
        XCTAssertNotNil(fx.waitForExit(seconds: 20), "the daemon ends once its requests are done")
    }

    /// A readdirplus reply that never reaches the kernel gives back the lookup each of its
    /// entries counted. The main bundle is another mount's directory, whose daemon is stopped
    /// while the listing reads it; the connection is aborted, that daemon goes on, and the
    /// reply fails. The mount cannot be asked any more (`.stats`): the count of nodes the
    /// kernel holds, which the daemon logs at its end, is compared with the one before.
    func testAListingThatNeverReachesTheKernelGivesItsLookupsBack() throws {
        let lower = try MountFixture(name + "Lower")
        defer { lower.tearDown() }
        for index in 0..<8 { try Disk.write(lower.inMain("bundle/listed/f\(index)"), "f\(index)") }
        try lower.start(["-o", "transport=device"])
        guard rmdir(fx.main) == 0, symlink(lower.inMount("bundle"), fx.main) == 0 else { return XCTFail("main: errno \(errno)") }
        try fx.start(["--log-level", "debug", "-o", "transport=device"])
        XCTAssertNotNil(Disk.lstat(fx.inMount("listed")))
        let directory = open(fx.inMount("listed"), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return XCTFail("opendir: errno \(errno)") }
        defer { close(directory) }
        _ = try fx.stats()
        let before = try XCTUnwrap(try fx.stats()["cached_nodes"])

        XCTAssertEqual(kill(lower.daemon, SIGSTOP), 0)
        var stopped = true
        defer { if stopped { kill(lower.daemon, SIGCONT) } }
        let listed = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            // the same open directory (its OPENDIR was answered), read from its start
            if let stream = fdopendir(dup(directory)) {
                _ = readdir(stream)
                closedir(stream)
            }
            listed.signal()
        }
        // the daemon has nothing else to ask of the stopped mount
        try eventually("the listing waits for the stopped mount") {
            kernelStacks(fx.daemon).contains { $0.contains("request_wait_answer") }
        }
        guard let mount = MountTable.current().mount(at: fx.mountpoint) else { return XCTFail("not mounted") }
        Unmounter.abortConnection(device: mount.device)
        XCTAssertEqual(listed.wait(timeout: .now() + 20), .success, "the reader is let go")
        XCTAssertEqual(kill(lower.daemon, SIGCONT), 0)
        stopped = false
        try eventually("the listing's reply failed") { fx.log.contains("readdirplus: reply not delivered") }
        XCTAssertNotNil(fx.waitForExit(seconds: 20), "the daemon ends once its requests are done")
        XCTAssert(fx.log.contains("at the end, the kernel held \(before) nodes"),
                  "nodes before: \(before); " + fx.log.split(separator: "\n").filter { $0.contains("at the end") }.joined())
    }

    /// Starts `program` and returns once its open of the leased file waits in the daemon.
    private func held(_ lease: Lease, _ program: String, _ arguments: [String]) throws -> pid_t {
        let pid = try Spawn.start(program, arguments)
        try eventually("\(program) waits for the lease") { lease.isWanted || Spawn.exited(pid) != nil }
        guard lease.isWanted else { throw TestFailure("\(program) ended before its open reached the lease") }
        return pid
    }

    /// The daemon's descriptors of regular files (its log among them), by number.
    private func regularFiles() throws -> [String: UInt64] {
        let directory = "/proc/\(fx.daemon)/fd"
        var found: [String: UInt64] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            var st = stat()
            if stat(directory + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG { found[name] = UInt64(st.st_ino) }
        }
        return found
    }

    /// Whether process `pid` waits in openat(2) (/proc/PID/syscall: the call's number first,
    /// 257 on x86-64, 56 on arm64).
    private func blockedInOpen(_ pid: pid_t) -> Bool {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/syscall", encoding: .utf8) else { return false }
        #if arch(arm64)
        return text.hasPrefix("56 ")
        #else
        return text.hasPrefix("257 ")
        #endif
    }
}
