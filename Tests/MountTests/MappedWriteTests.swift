import Foundation
import ProxyBundleCore
import XCTest

/// Writes through a shared mapping change a file's modification and change times, as on kernel
/// overlayfs and any local file system (tools that detect changes by mtime would miss them
/// otherwise): a main-bundle file (copied up by the open for writing) and a substitution file,
/// with the kernel reading and writing the substitution's file itself (passthrough) and with
/// every write going through the daemon.
final class MappedWriteTests: XCTestCase {
    func testWritesThroughASharedMappingUpdateTheTimes() throws {
        try compareWithKernelOverlayfs(environment: [])
    }

    func testWithoutPassthroughTheSame() throws {
        try compareWithKernelOverlayfs(environment: ["PROXYBUNDLE_NO_PASSTHROUGH=1"])
    }

    /// generic/080 and 215: a file written and synced through the mount, its times read; then
    /// the file opened, read and written through a shared mapping without msync, and closed:
    /// its times as stat then shows them are later (the kernel writes a passed-through file's
    /// pages to the layer's file itself, so the daemon learns of it only at the close).
    func testAMappedWriteShowsInTheTimesOnceClosed() throws {
        for environment in [[], ["PROXYBUNDLE_NO_PASSTHROUGH=1"]] {
            let fx = try MountFixture(name)
            defer { fx.tearDown() }
            fx.environment = environment
            try fx.start()
            let path = fx.inMount("new.bin")
            let made = open(path, O_RDWR | O_CREAT, 0o644)
            XCTAssertEqual(pwrite(made, [UInt8](repeating: 7, count: 4096), 4096, 0), 4096)
            XCTAssertEqual(fsync(made), 0)
            close(made)
            let result = mappedWriteThenClose(path)
            XCTAssertEqual(result, "mtime later, ctime later", "\(environment)")
        }
    }

    /// The times as coreutils' stat shows them: it asks (statx) for only what it prints, and
    /// the kernel refreshes only attributes it marked stale.
    private func times(_ path: String) -> [Double] {
        let shown = try? Spawn.run("/usr/bin/stat", ["-c", "%.9Y %.9Z", path])
        return (shown?.output ?? "").split(separator: " ").compactMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    private func mappedWriteThenClose(_ path: String) -> String {
        let before = times(path)
        guard before.count == 2 else { return "stat failed" }
        usleep(50_000)  // past the file system's timestamp granularity
        let fd = open(path, O_RDWR)
        guard fd >= 0 else { return "open: errno \(errno)" }
        guard let map = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            close(fd)
            return "mmap: errno \(errno)"
        }
        let read = map.load(as: UInt8.self)
        map.storeBytes(of: read &+ 1, as: UInt8.self)
        munmap(map, 4096)
        close(fd)
        let after = times(path)
        guard after.count == 2 else { return "stat failed" }
        let m = after[0] > before[0], c = after[1] > before[1]
        return "mtime \(m ? "later" : "unchanged"), ctime \(c ? "later" : "unchanged")"
    }

    private func compareWithKernelOverlayfs(environment: [String]) throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try Disk.write(fx.inMain("main.bin"), String(repeating: "m", count: 8192))
        try Disk.write(fx.inSubstitution("substitution.bin"), String(repeating: "s", count: 8192))
        let kernel = fx.root + "/kernel", upper = fx.root + "/kernel-upper"
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, upper])
        XCTAssertEqual(copy.status, 0, copy.error)
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(fx, at: kernel, upper: upper)
        fx.environment = environment
        try fx.start()
        let mine = writeThroughMappings(in: fx.mountpoint), theirs = writeThroughMappings(in: kernel)
        XCTAssertEqual(theirs, ["main.bin: mtime later, ctime later", "substitution.bin: mtime later, ctime later"])
        XCTAssertEqual(mine, theirs)
        for name in ["main.bin", "substitution.bin"] {
            XCTAssertEqual(try Disk.read(fx.inSubstitution(name)).first, "X", "\(name): the write landed in the substitution")
        }
        XCTAssertEqual(try Disk.read(fx.inMain("main.bin")).first, "m", "the main bundle untouched")
    }

    /// The clock the kernel takes file times from (CLOCK_REALTIME_COARSE, 5 on Linux).
    static func coarseNow() -> Double {
        var now = timespec()
        clock_gettime(clockid_t(5), &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// For each file below `root`: opened, written through a shared mapping, synced, closed, and
    /// whether its times as stat shows them then are later than before.
    private func writeThroughMappings(in root: String) -> [String] {
        func seconds(_ t: timespec) -> Double { Double(t.tv_sec) + Double(t.tv_nsec) / 1e9 }
        return ["main.bin", "substitution.bin"].map { name in
            let path = root + "/" + name
            let fd = open(path, O_RDWR)
            guard fd >= 0 else { return "\(name): open: errno \(errno)" }
            let before = Disk.lstat(path)
            // until the clock file times are taken from has passed them (its granularity is a
            // tick), so a change made now shows as later
            if let before {
                let latest = max(seconds(before.st_mtim), seconds(before.st_ctim))
                try? eventually("the coarse clock passes the file's times") { Self.coarseNow() > latest }
            }
            let map = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            guard let map, map != MAP_FAILED else {
                close(fd)
                return "\(name): mmap: errno \(errno)"
            }
            map.storeBytes(of: UInt8(ascii: "X"), as: UInt8.self)
            let synced = msync(map, 4096, MS_SYNC)
            munmap(map, 4096)
            close(fd)
            guard synced == 0, let before, let after = Disk.lstat(path) else { return "\(name): msync or stat failed" }
            let m = seconds(after.st_mtim) > seconds(before.st_mtim), c = seconds(after.st_ctim) > seconds(before.st_ctim)
            return "\(name): mtime \(m ? "later" : "unchanged"), ctime \(c ? "later" : "unchanged")"
        }
    }
}
