import CSyscalls
import Foundation
import XCTest

/// A file whose every name was removed while it was open keeps changing through its
/// descriptor (`fchmod`, `ftruncate`, `fchown`, `futimens`, the `f*xattr` calls), as on any file
/// system: a temporary file made and removed at once, the fallback where O_TMPFILE is missing.
/// These answered ESTALE through the mount. A main-bundle file removed while open for reading
/// stays as it is, and kernel overlayfs refuses the changes too.
final class RemovedOpenFileTests: XCTestCase {
    func testChangesThroughTheDescriptorOfARemovedFileMatchKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try Disk.write(fx.inMain("copied"), "from the main bundle")
        try Disk.write(fx.inMain("kept"), "from the main bundle")
        let (mine, theirs) = try KernelOverlay.onBoth(fx, exercise)
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("new fchmod ok"), "\(theirs)")  // the comparison covers changes that work
        XCTAssertTrue(theirs.contains("kept fchmod failed"), "\(theirs)")  // and changes refused
    }

    /// Each change and its outcome, then the attributes the descriptor shows, for a file made
    /// through the mount, a main-bundle file opened for writing (copied up) and one opened for
    /// reading, each removed while open.
    private func exercise(_ root: String) throws -> [String] {
        var log: [String] = []
        func note(_ what: String, _ result: Int) { log.append(what + (result >= 0 ? " ok" : " failed")) }
        for (name, flags) in [("new", O_RDWR | O_CREAT), ("copied", O_RDWR), ("kept", O_RDONLY)] {
            let fd = open(root + "/" + name, flags, 0o644)
            guard fd >= 0 else { throw TestFailure("open \(name): errno \(errno)") }
            defer { close(fd) }
            if name == "new" { XCTAssertEqual(write(fd, "new data", 8), 8) }
            XCTAssertEqual(unlink(root + "/" + name), 0, name)
            note("\(name) fchmod", Int(fchmod(fd, 0o600)))
            if flags != O_RDONLY { note("\(name) ftruncate", Int(ftruncate(fd, 3))) }
            note("\(name) fchown", Int(fchown(fd, 65534, 65534)))
            var times = [timespec(tv_sec: 5, tv_nsec: 0), timespec(tv_sec: 6, tv_nsec: 0)]
            note("\(name) futimens", Int(futimens(fd, &times)))
            note("\(name) fsetxattr", Int(fsetxattr(fd, "user.note", "yes", 3, 0)))
            var value = [UInt8](repeating: 0, count: 16)
            let got = fgetxattr(fd, "user.note", &value, value.count)
            log.append("\(name) fgetxattr " + (got >= 0 ? String(decoding: value.prefix(got), as: UTF8.self) : "errno \(errno)"))
            var names = [CChar](repeating: 0, count: 256)
            let listed = flistxattr(fd, &names, names.count)
            log.append("\(name) flistxattr \(listed)")
            note("\(name) fremovexattr", Int(fremovexattr(fd, "user.note")))
            var st = stat()
            XCTAssertEqual(fstat(fd, &st), 0, name)
            log.append("\(name) mode \(String(st.st_mode & 0o7777, radix: 8)) size \(st.st_size) owner \(st.st_uid):\(st.st_gid)"
                       + " mtime \(st.st_mtim.tv_sec) links \(st.st_nlink)")
        }
        return log
    }
}
