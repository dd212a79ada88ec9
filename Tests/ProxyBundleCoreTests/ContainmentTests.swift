@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Nothing in a layer may lead the overlay outside it: symlinks are shown, never followed.
/// Each refusal has its own errno, the one the kernel gives for the same walk when it follows
/// no symlink (`openat2` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or `O_NOFOLLOW` on the
/// last component): ELOOP for a symlink on the way or opened, ENOTDIR for a name below a
/// symlink the overlay shows as one. RESOLVE_BENEATH alone would give EXDEV for a symlink
/// leading out, but the overlay follows none, also none that stays inside. EIO is never right.
final class ContainmentTests: OverlayTestCase {
    private let secret = "SECRET sentinel outside both layers"

    override func setUpWithError() throws {
        try super.setUpWithError()
        try write(.outside, "sentinel", secret)
        try write(.outside, "a", "outside a")
        try setAttribute(.outside, "sentinel", "user.secret", "outside")
        try setAttribute(.outside, "a", "user.secret", "outside a")
    }

    /// Everything the overlay can tell about a symlink node, checked not to be the target's.
    private func checkIsSymlinkNotFollowed(_ overlay: Overlay, _ relative: String, target: String,
                                           file: StaticString = #filePath, line: UInt = #line) throws {
        let entry = try lookup(overlay, relative)
        XCTAssertEqual(fileType(entry.attributes), S_IFLNK, relative, file: file, line: line)
        XCTAssertEqual(entry.attributes.st_size, off_t(target.utf8.count), file: file, line: line)
        XCTAssertEqual(fileType(try overlay.attributes(Request(overlay), of: entry.node)), S_IFLNK, file: file, line: line)
        XCTAssertEqual(try overlay.readLink(Request(overlay), entry.node), n(target), "readLink is verbatim", file: file, line: line)
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: entry.node, name: n("sentinel")), file: file, line: line)
        assertErrno(ENOTDIR, try overlay.listDirectory(Request(overlay), entry.node), file: file, line: line)
        assertErrno(ELOOP, try overlay.openFile(Request(overlay), entry.node, flags: O_RDONLY), "opening a symlink must not open its target",
                    file: file, line: line)
    }

    // MARK: symlinks in either layer

    func testMainSymlinkToAbsolutePathOutside() throws {
        try symlink(.main, "out", to: outsideRoot)
        try symlink(.main, "out-file", to: outsideRoot + "/sentinel")
        let overlay = try makeOverlay()
        try checkIsSymlinkNotFollowed(overlay, "out", target: outsideRoot)
        try checkIsSymlinkNotFollowed(overlay, "out-file", target: outsideRoot + "/sentinel")
        XCTAssertEqual(item(try overlay.listDirectory(Request(overlay), rootNodeID), "out")?.type, UInt8(DT_LNK))
    }

    func testSubstitutionSymlinkToAbsolutePathOutside() throws {
        try symlink(.patch, "out", to: outsideRoot)
        try symlink(.patch, "etc", to: "/etc")
        let overlay = try makeOverlay()
        try checkIsSymlinkNotFollowed(overlay, "out", target: outsideRoot)
        try checkIsSymlinkNotFollowed(overlay, "etc", target: "/etc")
        assertErrno(ENOTDIR, try self.lookup(overlay, "etc/passwd"))
    }

    func testRelativeSymlinksClimbingOutOfEitherLayer() throws {
        try symlink(.main, "up", to: "../../..")
        try symlink(.patch, "up2", to: "../../..")
        try symlink(.main, "sub/up", to: "../../../..")
        try symlink(.patch, "psub/up", to: "../../../../etc/passwd")
        let overlay = try makeOverlay()
        try checkIsSymlinkNotFollowed(overlay, "up", target: "../../..")
        try checkIsSymlinkNotFollowed(overlay, "up2", target: "../../..")
        try checkIsSymlinkNotFollowed(overlay, "sub/up", target: "../../../..")
        try checkIsSymlinkNotFollowed(overlay, "psub/up", target: "../../../../etc/passwd")
    }

    func testSymlinkInMergedDirectoryToOutside() throws {
        try write(.main, "res/plain", "p")
        try symlink(.patch, "res/out", to: outsideRoot + "/sentinel")
        try symlink(.main, "res/mout", to: outsideRoot)
        let overlay = try makeOverlay()
        try checkIsSymlinkNotFollowed(overlay, "res/out", target: outsideRoot + "/sentinel")
        try checkIsSymlinkNotFollowed(overlay, "res/mout", target: outsideRoot)
    }

    func testExtendedAttributesOfASymlinkAreNotTheTargets() throws {
        try symlink(.patch, "link", to: outsideRoot + "/sentinel")
        let overlay = try makeOverlay()
        let link = try lookup(overlay, "link")
        assertErrno(ENODATA, try overlay.extendedAttribute(Request(overlay), link.node, name: n("user.secret")))
        let names = try overlay.extendedAttributeNames(Request(overlay), link.node)
        XCTAssertFalse(String(decoding: names, as: UTF8.self).contains("user.secret"))
    }

    // MARK: a substitution directory that is a symlink

    func testSubstitutionDirectoryReplacedBySymlinkToOutside() throws {
        try write(.main, "res/a", "main a")
        try symlink(.patch, "res", to: outsideRoot)
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        XCTAssertEqual(fileType(res.attributes), S_IFLNK)
        XCTAssertEqual(try overlay.readLink(Request(overlay), res.node), n(outsideRoot))
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: res.node, name: n("sentinel")))
        assertErrno(ENOTDIR, try overlay.lookup(Request(overlay), parent: res.node, name: n("a")))
        XCTAssertEqual(item(try overlay.listDirectory(Request(overlay), rootNodeID), "res")?.type, UInt8(DT_LNK))
    }

    /// The directory was real when the kernel looked it up; it is swapped for a symlink later.
    func testSubstitutionDirectorySwappedForSymlinkAfterLookup() throws {
        try write(.main, "res/a", "main a")
        try write(.patch, "res/a", "patch a")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        let a = try lookup(overlay, "res/a")
        XCTAssertEqual(try readContent(overlay, a.node), "patch a")

        try rename(.patch, "res", "res.moved")
        try symlink(.patch, "res", to: outsideRoot)

        // the directory is now the main bundle's alone, which has no "sentinel"
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: res.node, name: n("sentinel")), "lookup reached the sentinel")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), res.node)), ["a"], "only the main bundle's res is listed")
        // the node's path in the substitution goes through the symlink
        assertErrno(ELOOP, try overlay.attributes(Request(overlay), of: a.node), "attributes of the outside file")
        assertErrno(ELOOP, try readContent(overlay, a.node), "read the outside file")
        // read beside the descriptor kept for the moved directory (Linux 6.13), the node's own
        // file is asked, which has no such attribute; else the path, through the symlink
        assertErrno(Sys.hasAttributeCallsAt ? ENODATA : ELOOP, try overlay.extendedAttribute(Request(overlay), a.node, name: n("user.secret")),
                    "read an attribute through the symlink")
    }

    func testMainDirectorySwappedForSymlinkAfterLookup() throws {
        try write(.main, "res/a", "main a")
        let overlay = try makeOverlay()
        let res = try lookup(overlay, "res")
        let a = try lookup(overlay, "res/a")
        try rename(.main, "res", "res.moved")
        try symlink(.main, "res", to: outsideRoot)
        // neither layer has a directory res any more
        assertErrno(ENOENT, try overlay.lookup(Request(overlay), parent: res.node, name: n("sentinel")), "lookup reached the sentinel")
        XCTAssertEqual(entryNames(try overlay.listDirectory(Request(overlay), res.node)), [], "listing shows the outside directory")
        assertErrno(ELOOP, try readContent(overlay, a.node), "read the outside file")
    }

    func testFileSwappedForSymlinkAfterLookupIsNotFollowed() throws {
        try write(.main, "f", "main f")
        try write(.main, "dir/g", "main g")
        let overlay = try makeOverlay()
        let f = try lookup(overlay, "f")
        let g = try lookup(overlay, "dir/g")
        try remove(.main, "f")
        try symlink(.main, "f", to: outsideRoot + "/sentinel")
        try remove(.main, "dir/g")
        try symlink(.main, "dir/g", to: outsideRoot + "/sentinel")
        for node in [f.node, g.node] {
            // the node was a file: now that the name leads to a symlink it is stale (the
            // kernel looks the name up again and gets a new node for the symlink itself)
            assertErrno(ESTALE, try overlay.attributes(Request(overlay), of: node))
            XCTAssertEqual(fileType(try lookup(overlay, node == f.node ? "f" : "dir/g").attributes), S_IFLNK,
                           "the name's new node is the symlink's own")
            assertErrno(ESTALE, try overlay.openFile(Request(overlay), node, flags: O_RDONLY), "opened the sentinel")
            // the old node is detached by the new lookup: stale, and never the sentinel's value
            assertErrno(ESTALE, try overlay.extendedAttribute(Request(overlay), node, name: n("user.secret")), "read the sentinel's xattr")
        }
    }

    /// The kernel never sends a name containing "/" or NUL, but the core must not walk such a
    /// name (through a symlink, out of the layer) nor truncate it: such a name is invalid,
    /// refused before any walk.
    func testNameWithSlashDoesNotWalkThroughASymlink() throws {
        try symlink(.patch, "out", to: outsideRoot)
        try symlink(.main, "mout", to: outsideRoot)
        let overlay = try makeOverlay()
        for name in ["out/sentinel", "mout/sentinel"] {
            assertErrno(EINVAL, try overlay.lookup(Request(overlay), parent: rootNodeID, name: n(name)), "lookup of \(name)")
        }
    }

    func testNameWithNULIsNotTruncated() throws {
        try write(.main, "a", "a")
        let overlay = try makeOverlay()
        assertErrno(EINVAL, try overlay.lookup(Request(overlay), parent: rootNodeID, name: [0x61, 0x00, 0x62]), "\"a\\0b\" resolved to \"a\"")
    }

    func testLayerRootGivenAsSymlinkIsAccepted() throws {
        try write(.main, "a", "main a")
        let linkDir = try makeTemporaryDirectory("links")
        XCTAssertEqual(Glibc.symlink(mainRoot, linkDir + "/main"), 0)
        let overlay = try Overlay(main: Layer(path: linkDir + "/main"), substitution: Layer(path: patchRoot))
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "a").node), "main a")
    }

    func testLayerRootMustBeADirectory() throws {
        try write(.main, "file", "f")
        assertErrno(ENOTDIR, try Layer(path: path(.main, "file")))
        assertErrno(ENOENT, try Layer(path: path(.main, "missing")))
    }
}

/// A read-only layer is reached through a read-only copy of its mount (as root): even a write
/// the daemon never makes would be refused by the kernel.
final class ReadOnlyLayerTests: OverlayTestCase {
    func testTheKernelRefusesWritesToAReadOnlyLayer() throws {
        try XCTSkipIf(getuid() != 0, "the read-only copy of a mount needs CAP_SYS_ADMIN")
        let main = try Layer(path: mainRoot, preservesAccessTimes: true)
        let fd = openat(main.rootFD, "new-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        if fd >= 0 { close(fd) }
        XCTAssertEqual(fd, -1)
        XCTAssertEqual(errno, EROFS)
        XCTAssertEqual(mkdirat(main.rootFD, "new-dir", 0o755), -1)
        XCTAssertEqual(errno, EROFS)
        XCTAssertEqual(main.canonicalPath, RawPath(mainRoot), "named by the path it was opened at")
        let substitution = try Layer(path: patchRoot)
        let written = openat(substitution.rootFD, "new-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(written, 0, "the substitution stays writable")
        if written >= 0 { close(written) }
    }
}

/// A writable layer given the mount's noatime is reached through a noatime copy of its mount
/// (as root): reading leaves access times alone, and it stays writable, also once swapped.
final class NoAccessTimeLayerTests: OverlayTestCase {
    func testReadsLeaveAccessTimesAloneAndWritesWork() throws {
        try XCTSkipIf(getuid() != 0, "the copy of a mount needs CAP_SYS_ADMIN")
        try write(.patch, "file", "data")
        var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_100, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path(.patch, "file"), &times, 0), 0)
        let substitution = try Layer(path: patchRoot, accessTimes: .noatime)
        XCTAssertEqual(substitution.accessTimes, .noatime)
        let fd = openat(substitution.rootFD, "file", O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var buffer = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(read(fd, &buffer, buffer.count), 4)
        if fd >= 0 { close(fd) }
        var st = stat()
        XCTAssertEqual(stat(path(.patch, "file"), &st), 0)
        XCTAssertEqual(st.st_atim.tv_sec, 1_000_000_000)
        let written = openat(substitution.rootFD, "new-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(written, 0, "the substitution stays writable")
        if written >= 0 { close(written) }
    }

    func testASwappedSubstitutionKeepsTheMountsAccessTimeOptions() throws {
        let overlay = try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: patchRoot, accessTimes: .noatime),
                                  writable: true, substitutionPath: RawPath(patchRoot), cachesLookups: true)
        let aside = try makeTemporaryDirectory("patch-old")
        XCTAssertEqual(rmdir(aside), 0)
        XCTAssertEqual(Glibc.rename(patchRoot, aside), 0)
        XCTAssertEqual(Glibc.mkdir(patchRoot, 0o755), 0)
        XCTAssertTrue(try overlay.invalidate().swappedSubstitution)
        XCTAssertEqual(try Request(overlay).substitution.accessTimes, .noatime)
    }
}
