import CSyscalls
import Foundation
import XCTest

/// What the write path does when things go wrong: the daemon killed in the middle of a
/// copy-up, a full substitution, a whiteout that cannot be written, a user without permission.
final class CopyUpFailureTests: XCTestCase {
    var fx: MountFixture!
    /// Mounts made by a test (tmpfs, bind mounts), unmounted in tearDown, innermost first.
    var extraMounts: [String] = []

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        fx?.stop()
        for path in extraMounts.reversed() where umount2(path, 0) != 0 {
            _ = umount2(path, Int32(MNT_DETACH))
        }
        extraMounts = []
        fx?.tearDown()
    }

    // MARK: crash

    /// A kill after the copy finished tests nothing: tried (on an emptied substitution) until
    /// one lands while the copy is under way, 5 times at most; each is checked after a remount.
    func testKillDuringCopyUpLeavesTheOriginalOrACompleteCopy() throws {
        let mebibytes = 512
        try Pattern.write(fx.inMain("big"), mebibytes: mebibytes)
        var landed = 0
        for attempt in 1...5 where landed == 0 {
            try Probe.empty(fx.substitution)
            if try killDuringCopyUp() { landed = attempt }
            try checkAfterCrash(mebibytes: mebibytes)
            fx.stop()
        }
        XCTAssertGreaterThan(landed, 0, "no kill in 5 landed during the copy-up")
    }

    /// Appends to `big` (a copy-up) and kills the daemon once its copy holds 16 MiB; true when
    /// the kill landed during the copy: it had begun and its file never got the name.
    private func killDuringCopyUp() throws -> Bool {
        try fx.start()
        let work = fx.inSubstitution(".wh..wh.work")
        let writer = try Spawn.start("/bin/sh", ["-c", "printf x >> '\(fx.inMount("big"))'"])
        var reaped = false
        defer {
            // a reaped child's pid may be another process's by now: signal only one not reaped
            if !reaped {
                kill(writer, SIGKILL)
                _ = Spawn.wait(writer, seconds: 5)
            }
        }
        let seen = waitForTemporaryFile(in: work, atLeast: 16 << 20, seconds: 20)
        kill(fx.daemon, SIGKILL)
        fx.stop()
        reaped = Spawn.wait(writer, seconds: 10) != nil
        XCTAssertTrue(reaped, "the writer ends once the daemon is gone")
        let landed = seen != nil && Disk.lstat(fx.inSubstitution("big")) == nil
        print("copy-up crash: temporary file seen at \(seen.map { "\($0 >> 20) MiB" } ?? "never"),"
              + " the kill landed \(landed ? "during" : "after") the copy;"
              + " the substitution held \(try Disk.list(fx.substitution).sorted())")
        return landed
    }

    /// Remounts: the work directory is gone, and `big` is the original or a complete copy.
    private func checkAfterCrash(mebibytes: Int) throws {
        try fx.start()
        XCTAssertNil(Disk.lstat(fx.inSubstitution(".wh..wh.work")), "the remount removes what the crash left (the work directory is made when needed)")
        XCTAssertEqual(Set(try Disk.list(fx.substitution)).subtracting([".wh..wh.work", "big"]), [])
        let size = Int(Disk.lstat(fx.inMount("big"))?.st_size ?? -1)
        XCTAssertTrue(size == mebibytes << 20 || size == (mebibytes << 20) + 1, "size \(size)")
        XCTAssertEqual(try Pattern.check(fx.inMount("big"), mebibytes: mebibytes), size > mebibytes << 20 ? [UInt8(ascii: "x")] : [])
        if Disk.lstat(fx.inSubstitution("big")) != nil {
            XCTAssertEqual(Int(Disk.lstat(fx.inSubstitution("big"))?.st_size ?? -1), size, "the mount serves the copy")
        } else {
            XCTAssertEqual(size, mebibytes << 20, "without a copy the mount serves the original")
        }
    }

    // MARK: full substitution

    func testCopyUpLargerThanTheSubstitutionFailsWithENOSPCAndLeavesNothing() throws {
        try mountTmpfs(fx.substitution, "size=8m")
        try Pattern.write(fx.inMain("big"), mebibytes: 16)
        try Disk.write(fx.inMain("small"), "small")
        try fx.start()
        let fd = open(fx.inMount("big"), O_WRONLY | O_APPEND)
        let error = errno
        if fd >= 0 { close(fd) }
        XCTAssertEqual(fd, -1)
        XCTAssertEqual(error, ENOSPC, "errno \(error): \(String(cString: strerror(error)))")
        XCTAssertEqual(Disk.lstatError(fx.inSubstitution("big")), ENOENT, "no partial copy at the name")
        XCTAssertEqual(try Disk.list(fx.inSubstitution(".wh..wh.work")), [], "no partial copy in the work directory")
        XCTAssertEqual(try Pattern.check(fx.inMount("big"), mebibytes: 16), [], "the original is still served")
        var space = statvfs()
        XCTAssertEqual(statvfs(fx.substitution, &space), 0)
        XCTAssertGreaterThan(Int(space.f_bavail) * Int(space.f_bsize), 7 << 20, "the failed copy's space is given back")
        // with the space given back, small changes work
        let append = open(fx.inMount("small"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(append, 0, "errno \(errno)")
        XCTAssertEqual(write(append, "+", 1), 1)
        close(append)
        try Disk.write(fx.inMount("new"), "hello")
        XCTAssertEqual(try Disk.read(fx.inMount("small")), "small+")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new")), "hello")
    }

    func testWritingUntilTheSubstitutionIsFullGivesENOSPCAndReadsGoOn() throws {
        try mountTmpfs(fx.substitution, "size=4m")
        try Disk.write(fx.inMain("keep"), "main")
        try fx.start()
        let fd = open(fx.inMount("fill"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0, "errno \(errno)")
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5A, count: 256 << 10)
        var total = 0
        var result = 0
        var error: Int32 = 0
        while total <= 8 << 20 {
            result = write(fd, chunk, chunk.count)
            error = errno
            if result <= 0 { break }
            total += result
        }
        XCTAssertEqual(result, -1, "write stopped with \(result) after \(total) bytes")
        XCTAssertEqual(error, ENOSPC, "errno \(error): \(String(cString: strerror(error)))")
        XCTAssertLessThanOrEqual(total, 4 << 20)
        XCTAssertGreaterThan(total, 2 << 20)
        XCTAssertEqual(Int(Disk.lstat(fx.inMount("fill"))?.st_size ?? -1), total)
        XCTAssertEqual(try Disk.read(fx.inMount("keep")), "main")
        XCTAssertEqual(try Disk.list(fx.mountpoint).sorted(), ["fill", "keep"])
    }

    // MARK: whiteouts

    func testUnlinkFailsWithENOSPCWhenNoInodeIsLeftForTheWhiteout() throws {
        try mountTmpfs(fx.substitution, "size=1m,nr_inodes=16")
        try Disk.write(fx.inMain("dir/keep"), "main")
        try Disk.mkdir(fx.inSubstitution("dir"))
        try Disk.mkdir(fx.inSubstitution("filler"))
        try fx.start()
        var made = 0
        while made < 32 {
            let fd = open(fx.inSubstitution("filler/\(made)"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
            if fd < 0 { break }
            close(fd)
            made += 1
        }
        XCTAssertEqual(open(fx.inSubstitution("probe"), O_WRONLY | O_CREAT, 0o644), -1, "the tmpfs should have no inode left")
        XCTAssertEqual(unlink(fx.inMount("dir/keep")), -1)
        let error = errno
        XCTAssertEqual(error, ENOSPC, "errno \(error): \(String(cString: strerror(error)))")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/keep")), "main")
        XCTAssertEqual(try Disk.list(fx.inMount("dir")), ["keep"])
        XCTAssertEqual(try Disk.list(fx.inSubstitution("dir")), [])
    }

    func testUnlinkFailsWithEROFSWhenTheSubstitutionDirectoryIsReadOnly() throws {
        try Disk.write(fx.inMain("dir/keep"), "main")
        try Disk.mkdir(fx.inSubstitution("dir"))
        let dir = fx.inSubstitution("dir")
        guard mount(dir, dir, nil, UInt(MS_BIND), nil) == 0 else { throw TestFailure("bind mount: errno \(errno)") }
        extraMounts.append(dir)
        guard mount(dir, dir, nil, UInt(MS_BIND | MS_REMOUNT | MS_RDONLY), nil) == 0 else {
            throw TestFailure("remount read-only: errno \(errno)")
        }
        try fx.start()
        XCTAssertEqual(unlink(fx.inMount("dir/keep")), -1)
        let error = errno
        XCTAssertEqual(error, EROFS, "errno \(error): \(String(cString: strerror(error)))")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/keep")), "main")
        XCTAssertEqual(try Disk.list(fx.inMount("dir")), ["keep"])
    }

    // MARK: permissions

    func testOtherUsersCannotWriteRootsFilesAndOwnWhatTheyCreate() throws {
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        try Disk.write(fx.inMain("owned"), "root's", mode: 0o644)
        try Disk.mkdir(fx.inMain("shared"), mode: 0o777)
        try fx.start(["-o", "allow_other"])
        let denied = try asNobody("printf data > '\(fx.inMount("owned"))'")
        XCTAssertNotEqual(denied.status, 0)
        XCTAssertTrue(denied.error.contains("Permission denied"), denied.error)
        XCTAssertEqual(try asNobody("cat '\(fx.inMount("owned"))'").output, "root's")
        XCTAssertEqual(Set(try Disk.list(fx.substitution)).subtracting([".wh..wh.work"]), [], "nothing copied up")
        let created = try asNobody("printf mine > '\(fx.inMount("shared/new"))'")
        XCTAssertEqual(created.status, 0, created.error)
        let st = Disk.lstat(fx.inSubstitution("shared/new"))
        XCTAssertEqual(st?.st_uid, 65534)
        XCTAssertEqual(st?.st_gid, 65534)
        XCTAssertEqual(try Disk.read(fx.inMount("shared/new")), "mine")
        XCTAssertEqual(Disk.lstat(fx.inMount("shared/new"))?.st_uid, 65534)
    }

    func testWithoutAllowOtherOtherUsersAreRefused() throws {
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        try Disk.write(fx.inMain("open"), "for all", mode: 0o644)
        try fx.start()
        let refused = try asNobody("cat '\(fx.inMount("open"))'")
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.error.contains("Permission denied"), refused.error)
    }

    // MARK: helpers

    private func mountTmpfs(_ path: String, _ options: String) throws {
        guard mount("tmpfs", path, "tmpfs", 0, options) == 0 else { throw TestFailure("mount tmpfs: errno \(errno)") }
        extraMounts.append(path)
    }

    private func asNobody(_ command: String) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c", command],
                      seconds: 10)
    }

    /// Waits until the work directory holds an entry of at least `bytes`; returns its size then.
    /// The size of the copy in progress once it reaches `bytes`: a file in the work directory,
    /// named or not yet (an O_TMPFILE the daemon holds open, seen through /proc).
    private func waitForTemporaryFile(in work: String, atLeast bytes: Int, seconds: Double) -> Int? {
        let deadline = Date().addingTimeInterval(seconds)
        let descriptors = "/proc/\(fx.daemon)/fd"
        while Date() < deadline {
            for name in (try? Disk.list(work)) ?? [] {
                if let st = Disk.lstat(work + "/" + name), Int(st.st_size) >= bytes { return Int(st.st_size) }
            }
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? [] {
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(descriptors)/\(fd)")) ?? ""
                var st = stat()
                if target.hasPrefix(work + "/"), stat("\(descriptors)/\(fd)", &st) == 0, Int(st.st_size) >= bytes {
                    return Int(st.st_size)
                }
            }
            usleep(500)
        }
        return nil
    }
}

/// Deterministic, non-sparse file content: 1 MiB blocks of non-zero bytes, each 4 KiB page
/// stamped with the block's number and the page's, so a misplaced or missing page shows.
private enum Pattern {
    static let mebibyte = 1 << 20
    static let base: [UInt8] = (0..<mebibyte).map { UInt8($0 % 251 + 1) }

    static func block(_ index: Int, into buffer: inout [UInt8]) {
        buffer.withUnsafeMutableBytes { raw in
            for page in 0..<(mebibyte / 4096) {
                raw.storeBytes(of: UInt64(index << 8 | page) | 0x8080_8080_0000_0000, toByteOffset: page * 4096, as: UInt64.self)
            }
        }
    }

    static func write(_ path: String, mebibytes: Int) throws {
        try Disk.makeParent(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw TestFailure("create \(path): errno \(errno)") }
        defer { close(fd) }
        var buffer = base
        for index in 0..<mebibytes {
            block(index, into: &buffer)
            guard Glibc.write(fd, buffer, mebibyte) == mebibyte else { throw TestFailure("write \(path): errno \(errno)") }
        }
    }

    /// Checks the first `mebibytes` blocks of `path` and returns the bytes after them.
    static func check(_ path: String, mebibytes: Int) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        var expected = base
        var actual = [UInt8](repeating: 0, count: mebibyte)
        for index in 0..<mebibytes {
            block(index, into: &expected)
            let count = try readFully(fd, &actual)
            guard count == mebibyte else { throw TestFailure("\(path): short at MiB \(index) (\(count) bytes)") }
            let same = expected.withUnsafeBytes { e in actual.withUnsafeBytes { a in memcmp(e.baseAddress!, a.baseAddress!, mebibyte) == 0 } }
            guard same else { throw TestFailure("\(path): MiB \(index) differs") }
        }
        let count = try readFully(fd, &actual)
        return Array(actual[..<count])
    }

    private static func readFully(_ fd: Int32, _ buffer: inout [UInt8]) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 { throw TestFailure("read: errno \(errno)") }
            if n == 0 { break }
            done += n
        }
        return done
    }
}
