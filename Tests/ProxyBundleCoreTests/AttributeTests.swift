import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Attributes, opening files, file system statistics and access checks.
final class AttributeTests: OverlayTestCase {
    private func assertSameAttributes(_ reported: stat, _ layer: stat, _ label: String,
                                      file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(String(reported.st_mode, radix: 8), String(layer.st_mode, radix: 8), "\(label): mode", file: file, line: line)
        XCTAssertEqual(reported.st_size, layer.st_size, "\(label): size", file: file, line: line)
        XCTAssertEqual(reported.st_uid, layer.st_uid, "\(label): uid", file: file, line: line)
        XCTAssertEqual(reported.st_gid, layer.st_gid, "\(label): gid", file: file, line: line)
        XCTAssertEqual(reported.st_nlink, layer.st_nlink, "\(label): nlink", file: file, line: line)
        XCTAssertEqual(reported.st_ino, layer.st_ino, "\(label): ino", file: file, line: line)
        XCTAssertEqual(reported.st_mtim.tv_sec, layer.st_mtim.tv_sec, "\(label): mtime", file: file, line: line)
        XCTAssertEqual(reported.st_mtim.tv_nsec, layer.st_mtim.tv_nsec, "\(label): mtime ns", file: file, line: line)
        XCTAssertEqual(reported.st_rdev, layer.st_rdev, "\(label): rdev", file: file, line: line)
    }

    // MARK: attributes

    func testAttributesAreTheServingLayersLstat() throws {
        try write(.main, "main-file", "main file content", mode: 0o640)
        try setOwner(.main, "main-file", uid: 1234, gid: 2345)
        try setModificationTime(.main, "main-file", seconds: 1_000_000_000, nanoseconds: 123_456_789)

        try write(.main, "shadowed", "the main bundle's longer content", mode: 0o644)
        try write(.patch, "shadowed", "patch", mode: 0o600)
        try setOwner(.patch, "shadowed", uid: 4321, gid: 5432)
        try setModificationTime(.patch, "shadowed", seconds: 1_234_567_890, nanoseconds: 5)

        try mkdir(.main, "merged", mode: 0o755)
        try mkdir(.patch, "merged", mode: 0o710)
        try setModificationTime(.patch, "merged", seconds: 1_500_000_000, nanoseconds: 0)

        try mkdir(.main, "main-dir", mode: 0o705)
        try write(.main, "main-dir/inner", "i", mode: 0o444)
        try setModificationTime(.main, "main-dir/inner", seconds: 1_600_000_000, nanoseconds: 999)

        try symlink(.patch, "link", to: "some/target/path")
        try makeCharacterDevice(.main, "null", major: 1, minor: 3)
        try write(.main, "exec", "#!/bin/sh\n", mode: 0o4755)

        let overlay = try makeOverlay()
        let cases: [(String, Side)] = [
            ("main-file", .main), ("shadowed", .patch), ("merged", .patch), ("main-dir", .main),
            ("main-dir/inner", .main), ("link", .patch), ("null", .main), ("exec", .main),
        ]
        for (name, side) in cases {
            var expected = try lstatOf(side, name)
            // a directory merged from several layers counts one link, as on kernel overlayfs
            if name == "merged" { expected.st_nlink = 1 }
            let entry = try lookup(overlay, name)
            assertSameAttributes(entry.attributes, expected, "lookup \(name)")
            assertSameAttributes(try overlay.attributes(Request(overlay), of: entry.node), expected, "attributes(of:) \(name)")
        }
        var root = try lstatOf(.patch, "")
        root.st_nlink = 1
        assertSameAttributes(try overlay.attributes(Request(overlay), of: rootNodeID), root, "root")
        let mainFile = try overlay.attributes(Request(overlay), of: try lookup(overlay, "main-file").node)
        XCTAssertEqual(mainFile.st_mode, S_IFREG | 0o640)
        XCTAssertEqual(mainFile.st_size, 17)
        XCTAssertEqual(mainFile.st_uid, 1234)
        XCTAssertEqual(mainFile.st_mtim.tv_sec, 1_000_000_000)
        XCTAssertEqual(mainFile.st_mtim.tv_nsec, 123_456_789)
        let shadowed = try overlay.attributes(Request(overlay), of: try lookup(overlay, "shadowed").node)
        XCTAssertEqual(shadowed.st_mode, S_IFREG | 0o600)
        XCTAssertEqual(shadowed.st_size, 5)
        XCTAssertEqual(shadowed.st_uid, 4321)
        XCTAssertEqual(shadowed.st_mtim.tv_sec, 1_234_567_890)
    }

    func testAttributesFollowChangesInTheServingLayer() throws {
        try write(.main, "f", "short")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        XCTAssertEqual(f.attributes.st_size, 5)
        try write(.main, "f", "much longer now", mode: 0o600)
        let now = try overlay.attributes(Request(overlay), of: f.node)
        XCTAssertEqual(now.st_size, 15)
        XCTAssertEqual(now.st_mode, S_IFREG | 0o600)
    }

    func testAttributesOfADeletedBackingFileAreNoEntry() throws {
        try write(.main, "f", "f")
        try write(.main, "d/g", "g")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        let g = try lookup(overlay, "d/g")
        try remove(.main, "f")
        try remove(.main, "d/g")
        assertErrno(ENOENT, try overlay.attributes(Request(overlay), of: f.node))
        assertErrno(ENOENT, try overlay.attributes(Request(overlay), of: g.node))
    }

    // MARK: opening files

    func testOpenReadsTheServingLayersContent() throws {
        try write(.main, "m", "from main")
        try write(.main, "both", "main both")
        try write(.patch, "both", "patch both")
        try write(.main, "dir/inner", "main inner")
        try write(.patch, "dir/inner", "patch inner")
        try write(.main, "dir/below", "main below")
        let overlay = try makeOverlay()
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "m").node), "from main")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "both").node), "patch both")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "dir/inner").node), "patch inner")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "dir/below").node), "main below")
    }

    func testOpenedDescriptorIsReadOnly() throws {
        try write(.main, "m", "main")
        let overlay = try makeOverlay()
        let fd = try overlay.openFile(Request(overlay), try lookup(overlay, "m").node, flags: O_RDONLY).fd
        defer { close(fd) }
        let flags = fcntl(fd, F_GETFL)
        XCTAssertEqual(flags & O_ACCMODE, O_RDONLY)
        XCTAssertEqual(Glibc.write(fd, "x", 1), -1)
        XCTAssertNotEqual(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0, "descriptors are close-on-exec")
    }

    func testOpenForWritingIsReadOnlyFileSystem() throws {
        try write(.main, "m", "main")
        try write(.patch, "p", "patch")
        let overlay = try makeOverlay()
        for name in ["m", "p"] {
            let node = try lookup(overlay, name).node
            assertErrno(EROFS, try overlay.openFile(Request(overlay), node, flags: O_WRONLY), name)
            assertErrno(EROFS, try overlay.openFile(Request(overlay), node, flags: O_RDWR), name)
            assertErrno(EROFS, try overlay.openFile(Request(overlay), node, flags: O_WRONLY | O_APPEND), name)
            assertErrno(EROFS, try overlay.openFile(Request(overlay), node, flags: O_RDONLY | O_TRUNC), name)
        }
        XCTAssertEqual(try String(contentsOfFile: path(.main, "m"), encoding: .utf8), "main")
        XCTAssertEqual(try String(contentsOfFile: path(.patch, "p"), encoding: .utf8), "patch")
    }

    func testOpenADirectoryIsADirectory() throws {
        try mkdir(.main, "main-dir")
        try mkdir(.patch, "patch-dir")
        try mkdir(.main, "merged")
        try mkdir(.patch, "merged")
        let overlay = try makeOverlay()
        for name in ["main-dir", "patch-dir", "merged"] {
            assertErrno(EISDIR, try overlay.openFile(Request(overlay), try lookup(overlay, name).node, flags: O_RDONLY), name)
        }
        assertErrno(EISDIR, try overlay.openFile(Request(overlay), rootNodeID, flags: O_RDONLY))
    }

    func testOpenWithCreateFlagsOpensTheExistingFile() throws {
        try write(.main, "m", "main")
        let overlay = try makeOverlay()
        let fd = try overlay.openFile(Request(overlay), try lookup(overlay, "m").node, flags: O_RDONLY | O_CREAT | O_EXCL).fd
        defer { close(fd) }
        XCTAssertEqual(try readAll(fd), "main")
    }

    func testOpenASymlinkDoesNotOpenTheTarget() throws {
        try write(.main, "target", "target content")
        try symlink(.main, "link", to: "target")
        let overlay = try makeOverlay()
        assertErrno(ELOOP, try overlay.openFile(Request(overlay), try lookup(overlay, "link").node, flags: O_RDONLY))
    }

    // MARK: file system statistics

    /// As kernel overlayfs reports its upper file system's: every name up to it works (a name
    /// too long for a `.wh.` whiteout is whited out with a device; see NameLengthTests).
    func testNameLimitIsTheSubstitutions() throws {
        let overlay = try makeOverlay()
        var expected = statvfs()
        XCTAssertEqual(statvfs(patchRoot, &expected), 0)
        let reported = try overlay.fileSystemStatistics(Request(overlay))
        XCTAssertEqual(reported.f_namemax, expected.f_namemax)
        XCTAssertEqual(reported.f_namemax, 255)
        XCTAssertEqual(reported.f_bsize, expected.f_bsize)
        XCTAssertEqual(reported.f_blocks, expected.f_blocks)
        XCTAssertEqual(reported.f_fsid, expected.f_fsid)
    }

    func testStatisticsAreTheSubstitutionsFileSystem() throws {
        let shm = try makeTemporaryDirectory("patch-shm", under: "/dev/shm")
        var tmp = statvfs(), shmStats = statvfs()
        XCTAssertEqual(statvfs(mainRoot, &tmp), 0)
        XCTAssertEqual(statvfs(shm, &shmStats), 0)
        try XCTSkipIf(tmp.f_fsid == shmStats.f_fsid, "/dev/shm is the same file system as /tmp")
        let overlay = try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: shm))
        let reported = try overlay.fileSystemStatistics(Request(overlay))
        XCTAssertEqual(reported.f_fsid, shmStats.f_fsid)
        XCTAssertEqual(reported.f_blocks, shmStats.f_blocks)
        XCTAssertEqual(reported.f_namemax, shmStats.f_namemax)
    }

    // MARK: access

    func testAccessChecksOwnerGroupAndOther() throws {
        try write(.main, "f", "f", mode: 0o640)
        try setOwner(.main, "f", uid: 1000, gid: 1000)
        try mkdir(.main, "d", mode: 0o700)
        try write(.main, "noexec", "x", mode: 0o644)
        try write(.main, "anyexec", "x", mode: 0o601)
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f").node
        let owner = Requester(uid: 1000, gid: 3000, groups: [])
        let member = Requester(uid: 2000, gid: 3000, groups: [1000])
        let other = Requester(uid: 3000, gid: 3000, groups: [])
        let root = Requester(uid: 0, gid: 0, groups: [])

        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: owner), f, mask: R_OK | W_OK))
        assertErrno(EACCES, try overlay.checkAccess(Request(overlay, owner: owner), f, mask: X_OK))
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: member), f, mask: R_OK))
        assertErrno(EACCES, try overlay.checkAccess(Request(overlay, owner: member), f, mask: W_OK))
        assertErrno(EACCES, try overlay.checkAccess(Request(overlay, owner: other), f, mask: R_OK))
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: other), f, mask: F_OK))
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: root), f, mask: R_OK | W_OK))

        let d = try lookup(overlay, "d").node
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: root), d, mask: X_OK))
        assertErrno(EACCES, try overlay.checkAccess(Request(overlay, owner: other), d, mask: X_OK))
        assertErrno(EACCES, try overlay.checkAccess(Request(overlay, owner: root), try lookup(overlay, "noexec").node, mask: X_OK))
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: root), try lookup(overlay, "anyexec").node, mask: X_OK))
    }

    func testAccessUsesTheServingLayersMode() throws {
        try write(.main, "f", "f", mode: 0o600)
        try write(.patch, "f", "f", mode: 0o604)
        let overlay = try makeOverlay()
        let other = Requester(uid: 3000, gid: 3000, groups: [])
        XCTAssertNoThrow(try overlay.checkAccess(Request(overlay, owner: other), try lookup(overlay, "f").node, mask: R_OK))
    }
}
