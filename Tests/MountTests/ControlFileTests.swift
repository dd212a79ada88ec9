import Foundation
import XCTest

/// `.invalidate`, `.stats` and `.layers` at the mount's root: reachable by name but not listed
/// (a listing shows exactly the bundle), usable from the usual tools, not removable, and
/// hiding any layer entry of the same name.
final class ControlFileTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func invalidations() throws -> Int { try fx.figure("invalidations") }

    func shell(_ command: String, _ program: String = "/bin/bash") throws -> Int32 {
        try Spawn.run(program, ["-c", "cd '\(fx.mountpoint)' && " + command]).status
    }

    func testNotListedButReachableAsEmptyRegularFilesOwnedByTheMountingUser() throws {
        try Disk.write(fx.inMain("file"), "f")
        try fx.start()
        let listed = try Spawn.run("/bin/ls", ["-a", fx.mountpoint]).output.split(separator: "\n")
        XCTAssertEqual(listed, [".", "..", "file"], "a listing shows exactly the bundle")
        XCTAssertEqual(Disk.lstat(fx.inMount(".layers"))?.st_mode, S_IFREG | 0o644)
        let invalidate = try XCTUnwrap(Disk.lstat(fx.inMount(".invalidate")))
        XCTAssertEqual(invalidate.st_mode, S_IFREG | 0o644)
        XCTAssertEqual(invalidate.st_size, 0)
        XCTAssertEqual(invalidate.st_uid, geteuid())
        XCTAssertEqual(Disk.lstat(fx.inMount(".stats"))?.st_mode, S_IFREG | 0o444)
    }

    func testUsualToolsInvalidateAndTouchDoesNotFail() throws {
        try fx.start()
        let tools: [(String, String, Int)] = [
            ("echo > .invalidate", "/bin/bash", 1),
            ("echo > .invalidate", "/bin/dash", 1),
            ("printf '\\n' > .invalidate", "/bin/bash", 1),
            ("echo | tee .invalidate > /dev/null", "/bin/bash", 1),
            ("truncate -s0 .invalidate", "/bin/bash", 1),
            ("touch .invalidate", "/bin/bash", 0),
        ]
        for (command, program, expected) in tools {
            let before = try invalidations()
            XCTAssertEqual(try shell(command, program), 0, command)
            XCTAssertEqual(try invalidations() - before, expected, command)
        }
    }

    func testCannotBeRemovedRenamedOrReplaced() throws {
        try Disk.write(fx.inMain("file"), "f")
        try fx.start()
        XCTAssertEqual(unlink(fx.inMount(".invalidate")), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(rename(fx.inMount(".stats"), fx.inMount("stats")), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(rename(fx.inMount("file"), fx.inMount(".invalidate")), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(mkdir(fx.inMount(".stats"), 0o755), -1)
        XCTAssertEqual(errno, EEXIST)
        XCTAssertEqual(link(fx.inMount("file"), fx.inMount(".stats")), -1)
        XCTAssertEqual(errno, EEXIST)
        XCTAssertEqual(chmod(fx.inMount(".invalidate"), 0o600), -1)
        XCTAssertEqual(errno, EPERM)
        XCTAssertEqual(open(fx.inMount(".stats"), O_WRONLY), -1)
        XCTAssertEqual(errno, EACCES)
        XCTAssertEqual(try Disk.read(fx.inMain("file")), "f")
    }

    func testHidesLayerEntriesOfTheSameName() throws {
        try Disk.write(fx.inMain(".invalidate"), "main's own file")
        try Disk.write(fx.inSubstitution(".stats"), "patch's own file")
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount(".invalidate")), "")
        XCTAssertTrue(try Disk.read(fx.inMount(".stats")).hasPrefix("main: \(fx.main)\n"))
        let listed = try Spawn.run("/bin/ls", ["-a", fx.mountpoint]).output.split(separator: "\n")
        XCTAssertEqual(listed.filter { $0 == ".invalidate" || $0 == ".stats" }.count, 0, "\(listed)")
        XCTAssertEqual(try Disk.read(fx.inSubstitution(".stats")), "patch's own file")
    }

    func testStatsReportCacheFigures() throws {
        try Disk.write(fx.inMain("a/b.txt"), "b")
        try fx.start()
        _ = try Disk.read(fx.inMount("a/b.txt"))
        _ = Disk.lstat(fx.inMount("a/missing"))
        let stats = try fx.stats()
        for key in ["cache_entries", "hits", "misses", "invalidations", "last_invalidation_seconds"] {
            XCTAssertNotNil(stats[key], "no \(key) in \(stats)")
        }
        XCTAssertGreaterThanOrEqual(try fx.figure("cache_entries"), 3, "a, a/b.txt and the absent a/missing")
        XCTAssertGreaterThanOrEqual(try fx.figure("misses"), 3)
        XCTAssertEqual(stats["invalidations"], "0")
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try fx.stats()["invalidations"], "1")
    }

    /// Four processes list and read the tree while another invalidates 1,000 times: no error,
    /// no hang (bounded by the deadline), no crash.
    func testConcurrentReadersWhileInvalidatingAThousandTimes() throws {
        for d in 0..<10 {
            for f in 0..<10 { try Disk.write(fx.inMain("d\(d)/f\(f).txt"), "main \(d) \(f)") }
            try Disk.write(fx.inSubstitution("d\(d)/p.txt"), "patch \(d)")
        }
        try fx.start()
        let stop = fx.root + "/stop"
        let loop = "while [ ! -e '\(stop)' ]; do find '\(fx.mountpoint)' -type f ! -name .invalidate -exec cat {} + > /dev/null "
            + "|| exit 3; ls -laR '\(fx.mountpoint)' > /dev/null || exit 4; done"
        var readers = try (0..<4).map { _ in try Spawn.start("/bin/sh", ["-c", loop]) }
        defer {
            _ = creat(stop, 0o644)
            for pid in readers where Spawn.wait(pid, seconds: 10) == nil { kill(pid, SIGKILL) }
        }
        let deadline = Date().addingTimeInterval(120)
        for i in 0..<1000 {
            let fd = open(fx.inMount(".invalidate"), O_WRONLY | O_TRUNC)
            guard fd >= 0 else { return XCTFail("open .invalidate failed at \(i): errno \(errno)") }
            XCTAssertEqual(write(fd, "\n", 1), 1, "write \(i): errno \(errno)")
            close(fd)
            if Date() > deadline { return XCTFail("1,000 invalidations took more than 120 s (stopped at \(i))") }
        }
        _ = creat(stop, 0o644)
        for pid in readers {
            XCTAssertEqual(Spawn.wait(pid, seconds: 30), 0, "a reader failed (3: read error, 4: listing error)")
        }
        readers = []
        XCTAssertEqual(try fx.stats()["invalidations"], "1000")
        XCTAssertEqual(try Disk.read(fx.inMount("d3/p.txt")), "patch 3")
    }
}
