import Foundation
import XCTest

/// One worker reads requests at a time and answers them itself (Reader.c); another takes over
/// reading when it is busy with one request for long.
final class ReaderTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Voluntary context switches of all the daemon's threads: each one a worker falling asleep.
    private func sleeps() throws -> Int {
        var total = 0
        for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(fx.daemon)/task") {
            let status = try String(contentsOfFile: "/proc/\(fx.daemon)/task/\(task)/status", encoding: .utf8)
            for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
                total += Int(line.split(separator: "\t").last.map(String.init) ?? "") ?? 0
            }
        }
        return total
    }

    /// Before, the kernel woke one of the idle workers for about 7 requests in 10, though
    /// the worker that had answered the last request was polling for the next.
    func testBackToBackRequestsAreAnsweredWithoutWakingWorkers() throws {
        try fx.start()
        let before = try sleeps()
        for index in 0..<2_000 {
            XCTAssertEqual(Disk.lstatError(fx.inMount("missing-\(index)")), ENOENT)
        }
        let slept = try sleeps() - before
        XCTAssertLessThan(slept, 500, "workers fell asleep \(slept) times in 2,000 requests")
    }

    /// A copy-up of 768 MiB takes a worker for a while; lookups meanwhile are answered by
    /// another, not after the copy.
    func testASlowRequestDoesNotHoldUpTheOthers() throws {
        let mebibytes = 768
        try writeData(fx.inMain("big"), mebibytes: mebibytes)
        try Disk.write(fx.inMain("small"), "small")
        try fx.start()
        let writer = try Spawn.start("/bin/sh", ["-c", "printf x >> '\(fx.inMount("big"))'"])
        defer { kill(writer, SIGKILL); _ = Spawn.wait(writer, seconds: 30) }
        guard waitForCopy(in: fx.inPatch(".wh..wh.work"), atLeast: 32 << 20, seconds: 30) else {
            throw TestFailure("the copy-up never started")
        }
        for index in 0..<20 {
            XCTAssertEqual(Disk.lstatError(fx.inMount("missing-\(index)")), ENOENT)
        }
        XCTAssertEqual(try Disk.read(fx.inMount("small")), "small")
        XCTAssertNil(Spawn.exited(writer), "the lookups waited for the copy-up to end")
        XCTAssertEqual(Spawn.wait(writer, seconds: 60), 0)
        XCTAssertEqual(Int(Disk.lstat(fx.inPatch("big"))?.st_size ?? -1), (mebibytes << 20) + 1)
    }

    private func writeData(_ path: String, mebibytes: Int) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw TestFailure("open \(path): \(errno)") }
        defer { close(fd) }
        let block = [UInt8](repeating: 0xAB, count: 1 << 20)
        for _ in 0..<mebibytes where write(fd, block, block.count) != block.count {
            throw TestFailure("write \(path): \(errno)")
        }
    }

    private func waitForCopy(in work: String, atLeast bytes: Int, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            for name in (try? Disk.list(work)) ?? [] {
                if let st = Disk.lstat(work + "/" + name), Int(st.st_size) >= bytes { return true }
            }
            usleep(500)
        }
        return false
    }
}
