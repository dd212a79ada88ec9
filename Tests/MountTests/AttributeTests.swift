import CSyscalls
import Foundation
import XCTest

/// Attributes, symlinks, inode numbers, xattrs, statfs and the read-only contract.
final class AttributeTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func testModesOwnersSizesAndTimesAreThoseOnDisk() throws {
        try Disk.write(fx.inMain("ro.txt"), "read only", mode: 0o444)
        try Disk.write(fx.inMain("exec.sh"), "#!/bin/sh\n", mode: 0o755)
        try Disk.write(fx.inSubstitution("secret"), "s", mode: 0o600)
        try Disk.mkdir(fx.inMain("locked"), mode: 0o555)
        XCTAssertEqual(chown(fx.inMain("exec.sh"), 1234, 5678), 0)
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_234_567_890, tv_nsec: 987_654_321)]
        XCTAssertEqual(utimensat(AT_FDCWD, fx.inMain("ro.txt"), &times, 0), 0)
        try fx.start()
        for (relative, layer) in [("ro.txt", fx.main), ("exec.sh", fx.main), ("secret", fx.substitution), ("locked", fx.main)] {
            guard let seen = Disk.lstat(fx.inMount(relative)), let disk = Disk.lstat(layer + "/" + relative) else {
                XCTFail("lstat \(relative)"); continue
            }
            XCTAssertEqual(seen.st_mode, disk.st_mode, relative)
            XCTAssertEqual(seen.st_uid, disk.st_uid, relative)
            XCTAssertEqual(seen.st_gid, disk.st_gid, relative)
            XCTAssertEqual(seen.st_size, disk.st_size, relative)
            XCTAssertEqual(seen.st_mtim.tv_sec, disk.st_mtim.tv_sec, relative)
            XCTAssertEqual(seen.st_mtim.tv_nsec, disk.st_mtim.tv_nsec, relative)
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("ro.txt"))?.st_mtim.tv_nsec, 987_654_321)
        XCTAssertEqual(Disk.lstat(fx.inMount("exec.sh"))?.st_uid, 1234)
    }

    /// chown(path, -1, -1) changes nothing but the change time, as on ext4 and kernel
    /// overlayfs (pjdfstest chown/00.t: POSIX lets it keep the time; Linux does not): for a
    /// file and a directory of the main bundle and one of the substitution.
    func testChownToTheSameOwnerUpdatesTheChangeTime() throws {
        try Disk.write(fx.inMain("main.txt"), "m")
        try Disk.mkdir(fx.inMain("main-dir"))
        try Disk.write(fx.inSubstitution("substitution.txt"), "s")
        try Disk.mkdir(fx.inSubstitution("substitution-dir"))
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, fx.root + "/kernel-upper"])
        XCTAssertEqual(copy.status, 0, copy.error)
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in
            try ["main.txt", "main-dir", "substitution.txt", "substitution-dir"].map { name in
                let path = root + "/" + name
                guard let before = Disk.lstat(path) else { throw TestFailure("lstat \(path): errno \(errno)") }
                usleep(20_000)  // past the file system's timestamp granularity
                guard chown(path, uid_t.max, gid_t.max) == 0, let after = Disk.lstat(path) else {
                    throw TestFailure("chown \(path): errno \(errno)")
                }
                let later = (after.st_ctim.tv_sec, after.st_ctim.tv_nsec) > (before.st_ctim.tv_sec, before.st_ctim.tv_nsec)
                return "\(name): ctime \(later ? "later" : "unchanged")"
            }
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(mine, ["main.txt: ctime later", "main-dir: ctime later", "substitution.txt: ctime later",
                              "substitution-dir: ctime later"])
    }

    func testSymlinksAreShownVerbatim() throws {
        try Disk.write(fx.inMain("target.txt"), "target")
        try Disk.symlink(fx.inMain("relative"), to: "target.txt")
        try Disk.symlink(fx.inMain("dangling"), to: "does/not/exist")
        try Disk.symlink(fx.inSubstitution("absolute"), to: "/etc/hostname")
        try Disk.symlink(fx.inSubstitution("up"), to: "../../../../..")
        try Disk.symlink(fx.inMain("loop"), to: "loop")
        try fx.start()
        XCTAssertEqual(Disk.readLink(fx.inMount("relative")), "target.txt")
        XCTAssertEqual(try Disk.read(fx.inMount("relative")), "target")
        XCTAssertEqual(Disk.readLink(fx.inMount("dangling")), "does/not/exist")
        XCTAssertEqual(Disk.lstat(fx.inMount("dangling")).map { $0.st_mode & S_IFMT }, S_IFLNK)
        var st = stat()
        XCTAssertEqual(stat(fx.inMount("dangling"), &st), -1)
        XCTAssertEqual(errno, ENOENT)
        XCTAssertEqual(Disk.readLink(fx.inMount("absolute")), "/etc/hostname")
        XCTAssertEqual(Disk.readLink(fx.inMount("up")), "../../../../..")
        XCTAssertEqual(Disk.readLink(fx.inMount("loop")), "loop")
        XCTAssertEqual(stat(fx.inMount("loop"), &st), -1)
        XCTAssertEqual(errno, ELOOP)
    }

    func testInodeNumbersAreUniqueAndHardLinksShareThem() throws {
        try Disk.write(fx.inMain("one"), "1")
        try Disk.write(fx.inMain("sub/two"), "2")
        try Disk.write(fx.inSubstitution("three"), "3")
        try Disk.write(fx.inSubstitution("one"), "shadow")
        XCTAssertEqual(link(fx.inMain("one"), fx.inMain("sub/one-link")), 0)
        XCTAssertEqual(link(fx.inSubstitution("three"), fx.inSubstitution("three-link")), 0)
        try fx.start()
        let paths = ["", "one", "sub", "sub/two", "three", "three-link", "sub/one-link"]
        let inodes = paths.map { Disk.lstat(fx.inMount($0))?.st_ino ?? 0 }
        XCTAssertFalse(inodes.contains(0))
        XCTAssertEqual(inodes[4], inodes[5], "hard links in the patch share their inode number")
        // "one" is now the patch's file, so main's link to the old "one" is a different file
        XCTAssertNotEqual(inodes[1], inodes[6])
        XCTAssertEqual(Set(inodes).count, paths.count - 1)
        XCTAssertEqual(Disk.lstat(fx.inMount("three"))?.st_nlink, 2)
        // stable: asking again gives the same numbers
        XCTAssertEqual(paths.map { Disk.lstat(fx.inMount($0))?.st_ino ?? 0 }, inodes)
    }

    func testExtendedAttributesOfTheServingLayer() throws {
        try Disk.write(fx.inMain("tagged"), "t")
        try Disk.write(fx.inSubstitution("dir/x"), "x")
        guard setxattr(fx.inMain("tagged"), "user.colour", "blue", 4, 0) == 0 else {
            throw XCTSkip("user xattrs not supported on this file system")
        }
        XCTAssertEqual(setxattr(fx.inSubstitution("dir"), "user.overlay.opaque", "y", 1, 0), 0)
        XCTAssertEqual(setxattr(fx.inSubstitution("dir"), "user.kept", "k", 1, 0), 0)
        try fx.start()
        var value = [CChar](repeating: 0, count: 16)
        XCTAssertEqual(getxattr(fx.inMount("tagged"), "user.colour", &value, value.count), 4)
        XCTAssertEqual(String(decoding: value.prefix(4).map { UInt8(bitPattern: $0) }, as: UTF8.self), "blue")
        XCTAssertEqual(getxattr(fx.inMount("tagged"), "user.colour", nil, 0), 4)
        XCTAssertEqual(getxattr(fx.inMount("tagged"), "user.colour", &value, 2), -1)
        XCTAssertEqual(errno, ERANGE)
        XCTAssertEqual(getxattr(fx.inMount("dir"), "user.overlay.opaque", &value, value.count), -1)
        XCTAssertEqual(errno, ENODATA)
        var names = [CChar](repeating: 0, count: 256)
        let length = listxattr(fx.inMount("dir"), &names, names.count)
        XCTAssertGreaterThan(length, 0)
        let listed = names[..<max(0, length)].split(separator: 0).map { String(cString: Array($0) + [0]) }
        XCTAssertTrue(listed.contains("user.kept"), "\(listed)")
        XCTAssertFalse(listed.contains { $0.hasPrefix("user.overlay.") }, "\(listed)")
    }

    func testStatfsReportsTheSubstitution() throws {
        try fx.start(["-o", "ro"])
        var mounted = statvfs()
        var backing = statvfs()
        XCTAssertEqual(statvfs(fx.mountpoint, &mounted), 0)
        XCTAssertEqual(statvfs(fx.substitution, &backing), 0)
        XCTAssertEqual(mounted.f_namemax, backing.f_namemax)
        XCTAssertEqual(mounted.f_blocks * mounted.f_frsize, backing.f_blocks * backing.f_frsize)
    }

    func testEveryModificationFailsWithEROFSAndChangesNothing() throws {
        try Disk.write(fx.inMain("file"), "main")
        try Disk.write(fx.inSubstitution("pfile"), "patch")
        try Disk.mkdir(fx.inMain("dir"))
        try fx.start(["-o", "ro"])
        let patchBefore = try TreeChecksum.of(fx.substitution)
        let m = fx.inMount
        let attempts: [(String, () -> Int32)] = [
            ("open for write", { let fd = open(m("file"), O_WRONLY); if fd >= 0 { close(fd) }; return fd }),
            ("create", { let fd = open(m("new"), O_WRONLY | O_CREAT, 0o644); if fd >= 0 { close(fd) }; return fd }),
            ("truncate", { truncate(m("pfile"), 0) }),
            ("mkdir", { mkdir(m("newdir"), 0o755) }),
            ("unlink", { unlink(m("file")) }),
            ("rmdir", { rmdir(m("dir")) }),
            ("rename", { rename(m("file"), m("moved")) }),
            ("chmod", { chmod(m("file"), 0o600) }),
            ("chown", { chown(m("file"), 1, 1) }),
            ("utimes", { utimensat(AT_FDCWD, m("file"), nil, 0) }),
            ("symlink", { symlink("x", m("sym")) }),
            ("link", { link(m("file"), m("hard")) }),
            ("mknod", { mknod(m("fifo"), S_IFIFO | 0o644, 0) }),
            ("setxattr", { setxattr(m("file"), "user.a", "b", 1, 0) }),
        ]
        for (what, attempt) in attempts {
            XCTAssertEqual(attempt(), -1, what)
            XCTAssertEqual(errno, EROFS, what)
        }
        // the kernel mount stays read-write (so .invalidate works), so access(W_OK) checks mode bits only
        XCTAssertEqual(access(m("file"), R_OK), 0)
        XCTAssertEqual(try TreeChecksum.of(fx.substitution), patchBefore, "the substitution changed")
    }
}
