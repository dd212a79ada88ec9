import CSyscalls
import Foundation
import XCTest

/// A substitution on a small tmpfs that runs out of space or inodes, beyond what
/// CopyUpFailureTests covers (a copy-up larger than the space, writing until full, one unlink
/// without an inode for its whiteout): a materializing rename, many removals, every kind of
/// creation, and the steps that need two inodes (a directory made over a whiteout needs its
/// opaque marker, a rename of a main file its copy and its whiteout). Every failure must be
/// ENOSPC and leave the visible tree as it was; the daemon keeps serving; a remount finds the
/// work directory empty and the same tree.
final class ExhaustionTests: XCTestCase {
    var fx: MountFixture!
    var extraMounts: [String] = []

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        fx?.stop()
        for path in extraMounts.reversed() where umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
        extraMounts = []
        fx?.tearDown()
    }

    func testMaterializingRenameFailsWithENOSPCAndChangesNothing() throws {
        try mountTmpfs("size=4m")
        for i in 0..<8 { try Filler.dense(fx.inMain("tree/sub\(i % 2)/f\(i)"), mebibytes: 1, stamp: i) }
        try Disk.write(fx.inMain("tree/gone"), "hidden")
        try Disk.whiteout(fx.inSubstitution("tree"), "gone")
        try Disk.write(fx.inSubstitution("tree/own"), "patch's own")
        try Disk.mkdir(fx.inMain("elsewhere"))
        try fx.start()
        let before = try Probe.describe(fx.mountpoint, modes: true)
        let patchBefore = try Probe.describe(fx.substitution)
        for (from, to) in [("tree", "moved"), ("tree", "elsewhere/moved"), ("tree/sub0", "sub0")] {
            XCTAssertEqual(rename(fx.inMount(from), fx.inMount(to)), -1, "\(from) -> \(to)")
            XCTAssertEqual(errno, ENOSPC, "\(from) -> \(to): \(Raw.error())")
            try assertUnchanged(before, "after renaming \(from) to \(to)")
        }
        XCTAssertEqual(pb_renameat2(AT_FDCWD, fx.inMount("tree"), AT_FDCWD, fx.inMount("elsewhere"), pb_RENAME_EXCHANGE), -1)
        XCTAssertEqual(errno, ENOSPC)
        try assertUnchanged(before, "after an exchange")
        // the work directory, made for the copies, is the daemon's
        let patchNow = try Probe.describe(fx.substitution).filter { !$0.key.hasPrefix(".wh..wh.work") }
        XCTAssertEqual(Probe.differences(patchNow, patchBefore), [], "the substitution changed")
        XCTAssertGreaterThan(freeBytes(), 3 << 20, "the failed copies' space is given back")
        // small changes still work
        XCTAssertEqual(rename(fx.inMount("tree/own"), fx.inMount("own")), 0)
        try remountAndCheck(Probe.describe(fx.mountpoint, modes: true))
    }

    func testRemovingMainFilesUntilNoInodeIsLeft() throws {
        try mountTmpfs("size=4m,nr_inodes=40")
        for i in 0..<60 { try Disk.write(fx.inMain("del/f\(i)"), "file \(i)") }
        for a in 0..<3 { for c in 0..<5 { try Disk.write(fx.inMain("tree/a\(a)/c\(c)"), "\(a)/\(c)") } }
        try fx.start()
        var tree = try Probe.describe(fx.mountpoint, modes: true)
        var removed = 0, failed = 0
        for i in 0..<60 {
            if unlink(fx.inMount("del/f\(i)")) == 0 {
                XCTAssertEqual(failed, 0, "an unlink succeeded after one ran out of inodes")
                removed += 1
                tree["del/f\(i)"] = nil
            } else {
                XCTAssertEqual(errno, ENOSPC, "unlink del/f\(i): \(Raw.error())")
                failed += 1
            }
            try assertUnchanged(tree, "after unlink del/f\(i)")
        }
        XCTAssertGreaterThan(removed, 10)
        XCTAssertGreaterThan(failed, 10)
        // rm -rf of a main tree: nothing goes, nothing is half gone
        for a in 0..<3 {
            for c in 0..<5 {
                XCTAssertEqual(unlink(fx.inMount("tree/a\(a)/c\(c)")), -1)
                XCTAssertEqual(errno, ENOSPC)
            }
            XCTAssertEqual(rmdir(fx.inMount("tree/a\(a)")), -1)
            XCTAssertEqual(errno, ENOTEMPTY)
        }
        try assertUnchanged(tree, "after rm -rf tree")
        print("inode-limited substitution: \(removed) unlinks returned, then \(failed) ENOSPC")
        try remountAndCheck(tree)
    }

    func testEveryCreationFailsWithENOSPCWhenNoInodeIsLeft() throws {
        try mountTmpfs("size=4m,nr_inodes=64")
        try Disk.write(fx.inMain("file"), "main file")
        try Disk.write(fx.inMain("dir/inner"), "main inner")
        try Disk.mkdir(fx.inMain("emptydir"))
        try Disk.mkdir(fx.inSubstitution("own"))
        try fx.start()
        try leaveFreeInodes(0)
        let before = try Probe.describe(fx.mountpoint, modes: true)
        let attempts: [(String, () -> Int32)] = [
            ("create", { open(self.fx.inMount("new"), O_WRONLY | O_CREAT | O_EXCL, 0o644) }),
            ("create in a main directory", { open(self.fx.inMount("dir/new"), O_WRONLY | O_CREAT | O_EXCL, 0o644) }),
            ("mkdir", { mkdir(self.fx.inMount("own/newdir"), 0o755) }),
            ("mkdir in a main directory", { mkdir(self.fx.inMount("emptydir/newdir"), 0o755) }),
            ("symlink", { symlink("target", self.fx.inMount("own/link")) }),
            ("mknod", { mknod(self.fx.inMount("own/fifo"), S_IFIFO | 0o644, 0) }),
            ("link a main file", { link(self.fx.inMount("file"), self.fx.inMount("own/hard")) }),
            ("rename a main file", { rename(self.fx.inMount("file"), self.fx.inMount("own/file")) }),
            ("copy-up for writing", { open(self.fx.inMount("file"), O_WRONLY) }),
            ("chmod of a main file", { chmod(self.fx.inMount("dir/inner"), 0o600) }),
            ("rmdir of a main directory", { rmdir(self.fx.inMount("emptydir")) }),
            ("unlink of a main file", { unlink(self.fx.inMount("file")) }),
        ]
        for (label, body) in attempts {
            let result = body()
            let error = errno
            if result >= 0 && (label.hasPrefix("create") || label.hasPrefix("copy-up")) { close(result) }
            XCTAssertEqual(result, -1, "\(label) succeeded without a free inode")
            XCTAssertEqual(error, ENOSPC, "\(label): \(String(cString: strerror(error)))")
            try assertUnchanged(before, "after \(label)")
        }
        try remountAndCheck(before)
    }

    func testChangesNeedingTwoInodesWithOnlyOneLeft() throws {
        try mountTmpfs("size=4m,nr_inodes=64")
        try Disk.write(fx.inMain("renamed"), "main file")
        try Disk.write(fx.inMain("sub/deep/file"), "main deep")
        try fx.start()
        // a rename of a main file needs its copy and the whiteout at the old name
        try leaveFreeInodes(1)
        var tree = try Probe.describe(fx.mountpoint, modes: true)
        if rename(fx.inMount("renamed"), fx.inMount("renamed2")) == 0 {
            tree["renamed2"] = tree["renamed"]
            tree["renamed"] = nil
        } else {
            XCTAssertEqual(errno, ENOSPC, Raw.error())
        }
        try assertUnchanged(tree, "after a rename with one inode")
        // a file created two levels below main directories needs both copied up first
        try leaveFreeInodes(1)
        tree = try Probe.describe(fx.mountpoint, modes: true)
        XCTAssertEqual(open(fx.inMount("sub/deep/new"), O_WRONLY | O_CREAT | O_EXCL, 0o644), -1)
        XCTAssertEqual(errno, ENOSPC)
        try assertUnchanged(tree, "after a create below main directories")
        try leaveFreeInodes(0)
        try remountAndCheck(tree)
    }

    /// A directory made over a whiteout needs a second inode for its opaque marker: with one
    /// left, mkdir makes the whole opaque directory or nothing, also as seen after the daemon
    /// reads the layers again.
    func testMkdirOverAWhiteoutWithOneInodeLeftIsWholeOrNothing() throws {
        try mountTmpfs("size=4m,nr_inodes=64")
        try Disk.write(fx.inMain("d/old"), "main's old content")
        try Disk.whiteout(fx.substitution, "d")
        try fx.start()
        try leaveFreeInodes(1)
        let made = mkdir(fx.inMount("d"), 0o755) == 0
        let error = errno
        try Disk.write(fx.inMount(".invalidate"), "\n")  // what a remount would show
        if made {
            XCTAssertEqual(try Disk.list(fx.inMount("d")), [], "main's entries came back under a new directory")
        } else {
            XCTAssertEqual(error, ENOSPC)
            XCTAssertEqual(Disk.lstatError(fx.inSubstitution("d")), ENOENT, "mkdir failed with ENOSPC but left the directory in the substitution")
            XCTAssertEqual(Disk.lstatError(fx.inMount("d")), ENOENT, "mkdir failed with ENOSPC but the directory shows")
        }
        XCTAssertEqual(Disk.lstatError(fx.inMount("d/old")), ENOENT)
    }

    func testSymlinkAndWriteFailWhenSpaceRunsOutButInodesRemain() throws {
        try mountTmpfs("size=1m")
        try Disk.write(fx.inMain("file"), String(repeating: "m", count: 10_000))
        try fx.start()
        try fillSpace()
        let before = try Probe.describe(fx.mountpoint, modes: true)
        let longTarget = String(repeating: "t/", count: 500)
        XCTAssertEqual(symlink(longTarget, fx.inMount("longlink")), -1, "a long symlink target needs a page")
        XCTAssertEqual(errno, ENOSPC)
        let fd = open(fx.inMount("file"), O_WRONLY | O_APPEND)
        XCTAssertEqual(fd, -1, "the copy-up needs space")
        XCTAssertEqual(errno, ENOSPC)
        try assertUnchanged(before, "with no space")
        // an empty file needs no block: it is made, and a write to it fails
        let empty = open(fx.inMount("empty"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(empty, 0, Raw.error())
        if empty >= 0 {
            let chunk = [UInt8](repeating: 1, count: 1 << 16)
            XCTAssertEqual(write(empty, chunk, chunk.count), -1)
            XCTAssertEqual(errno, ENOSPC)
            close(empty)
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("empty"))?.st_size, 0)
        XCTAssertEqual(try Disk.read(fx.inMount("file")), String(repeating: "m", count: 10_000), "reads go on")
        var after = before
        after["empty"] = try Probe.describe(fx.mountpoint, modes: true)["empty"]
        try remountAndCheck(after)
    }

    // MARK: helpers

    private func mountTmpfs(_ options: String) throws {
        guard mount("tmpfs", fx.substitution, "tmpfs", 0, options) == 0 else { throw TestFailure("mount tmpfs: errno \(errno)") }
        extraMounts.append(fx.substitution)
    }

    private var fillerDirectory: String { fx.inSubstitution(".wh..wh.filler") }

    /// Creates or removes empty files in a hidden directory of the substitution until exactly
    /// `count` inodes are free.
    private func leaveFreeInodes(_ count: Int) throws {
        try Disk.mkdir(fillerDirectory)
        var index = (try Disk.list(fillerDirectory)).count
        while freeInodes() > count {
            let fd = open(fillerDirectory + "/i\(index)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            guard fd >= 0 else { throw TestFailure("filler: errno \(errno)") }
            close(fd)
            index += 1
        }
        while freeInodes() < count {
            guard let name = try Disk.list(fillerDirectory).first, unlink(fillerDirectory + "/" + name) == 0 else {
                throw TestFailure("cannot free an inode")
            }
        }
        XCTAssertEqual(freeInodes(), count)
    }

    /// Fills the substitution's space with one hidden file.
    private func fillSpace() throws {
        try Disk.mkdir(fillerDirectory)
        let fd = open(fillerDirectory + "/blob", O_WRONLY | O_CREAT, 0o644)
        guard fd >= 0 else { throw TestFailure("filler: errno \(errno)") }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 7, count: 4096)
        while write(fd, chunk, chunk.count) > 0 {}
        XCTAssertEqual(errno, ENOSPC)
    }

    private func freeInodes() -> Int {
        var st = statvfs()
        return statvfs(fx.substitution, &st) == 0 ? Int(st.f_ffree) : -1
    }

    private func freeBytes() -> Int {
        var st = statvfs()
        return statvfs(fx.substitution, &st) == 0 ? Int(st.f_bavail) * Int(st.f_bsize) : -1
    }

    private func assertUnchanged(_ before: [String: String], _ label: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(Probe.differences(try Probe.describe(fx.mountpoint, modes: true), before), [], "\(label): (now | before)",
                       file: file, line: line)
        XCTAssertEqual(Probe.workLeftovers(fx), [], "\(label): leftovers in the work directory", file: file, line: line)
        XCTAssertTrue(fx.isMounted, "\(label): the mount is gone", file: file, line: line)
    }

    /// Remounts (the work directory is removed) and checks the tree is `expected`.
    private func remountAndCheck(_ expected: [String: String], file: StaticString = #filePath, line: UInt = #line) throws {
        fx.stop()
        try fx.start()
        XCTAssertNil(Probe.workEntries(fx), "the work directory after the remount (made when needed)", file: file, line: line)
        XCTAssertEqual(Probe.differences(try Probe.describe(fx.mountpoint, modes: true), expected), [], "after the remount (now | before)",
                       file: file, line: line)
    }
}
