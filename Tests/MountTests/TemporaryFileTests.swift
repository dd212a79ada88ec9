import CSyscalls
import Foundation
import XCTest

/// O_TMPFILE through the mount, against kernel overlayfs: an unnamed file that `linkat` names
/// later (in a main-bundle directory, over a whited-out name, twice), one made with O_EXCL that
/// cannot be named, and one closed unnamed that leaves nothing behind. The kernel sends TMPFILE,
/// which libfuse 3.14 does not know (it answered ENOSYS, so every O_TMPFILE open failed).
final class TemporaryFileTests: XCTestCase {
    func testUnnamedFilesMatchKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try Disk.write(fx.inMain("d/x"), "from the main bundle")
        let (mine, theirs) = try KernelOverlay.onBoth(fx, exercise)
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("link named 0"), "\(theirs)")  // the comparison covers a link that works
        XCTAssertEqual(try Disk.read(fx.inSubstitution("d/named")), "unnamed data+more")
        XCTAssertEqual(try Disk.list(fx.inSubstitution("d")).sorted(), ["named", "x"], "no whiteout left, nothing unnamed")
        XCTAssertEqual(try Disk.list(fx.inSubstitution(".wh..wh.work")), [], "nothing left in the work directory")
    }

    /// Each step and its outcome (0 or the errno), then what the names show.
    private func exercise(_ root: String) throws -> [String] {
        var log: [String] = []
        func note(_ what: String, _ result: Int32) { log.append("\(what) \(result == 0 ? 0 : errno)") }
        func unnamed(_ flags: Int32) throws -> Int32 {
            let fd = open(root + "/d", pb_O_TMPFILE | O_RDWR | flags, 0o640)
            guard fd >= 0 else { throw TestFailure("O_TMPFILE in \(root): errno \(errno)") }
            return fd
        }
        func link(_ fd: Int32, _ name: String) -> Int32 {
            linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, root + "/" + name, AT_SYMLINK_FOLLOW)
        }
        let fd = try unnamed(0)
        defer { close(fd) }
        XCTAssertEqual(write(fd, "unnamed data", 12), 12)
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        log.append("unnamed mode \(String(st.st_mode & 0o7777, radix: 8)) links \(st.st_nlink) size \(st.st_size)")
        note("fchmod", fchmod(fd, 0o600))
        note("link named", link(fd, "d/named"))
        XCTAssertEqual(write(fd, "+more", 5), 5)
        note("link second", link(fd, "second"))
        let excl = try unnamed(O_EXCL)
        defer { close(excl) }
        note("link O_EXCL", link(excl, "d/never"))
        let other = try unnamed(0)
        defer { close(other) }
        XCTAssertEqual(write(other, "other", 5), 5)
        note("link onto a name", link(other, "d/x"))
        note("unlink main name", unlink(root + "/d/x"))
        note("link over its whiteout", link(other, "d/x"))
        close(try unnamed(0))
        for name in ["d/named", "second", "d/x"] {
            let shown = Disk.lstat(root + "/" + name)
            log.append("\(name) mode \(String((shown?.st_mode ?? 0) & 0o7777, radix: 8)) links \(shown?.st_nlink ?? 0) "
                       + ((try? Disk.read(root + "/" + name)) ?? "unreadable"))
        }
        log.append("d lists " + (try Disk.list(root + "/d")).sorted().joined(separator: ","))
        return log
    }
}
