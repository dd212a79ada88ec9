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

    /// The same for a directory made through the mount, held open and removed (`rmdir`): the
    /// kernel opens directories without telling the daemon, so the changes went through
    /// nothing the daemon held and answered ESTALE (issue 22); on kernel overlayfs they work.
    func testChangesThroughTheDescriptorOfARemovedDirectoryMatchKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in
            var log: [String] = []
            func note(_ what: String, _ result: Int32) { log.append(what + (result == 0 ? " ok" : " failed: errno \(errno)")) }
            note("mkdir", mkdir(root + "/held", 0o755))
            let fd = open(root + "/held", O_RDONLY | O_DIRECTORY)
            guard fd >= 0 else { throw TestFailure("open held: errno \(errno)") }
            defer { close(fd) }
            note("rmdir", rmdir(root + "/held"))
            note("fchmod", fchmod(fd, 0o700))
            note("fchown", fchown(fd, 65534, 65534))
            var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
            note("futimens", futimens(fd, &times))
            note("fsetxattr", fsetxattr(fd, "user.note", "held", 4, 0))
            var st = stat()
            note("fstat", fstat(fd, &st))
            log.append("mode \(String(st.st_mode, radix: 8)) owner \(st.st_uid):\(st.st_gid) mtime \(st.st_mtim.tv_sec) links \(st.st_nlink)")
            var value = [UInt8](repeating: 0, count: 16)
            let length = fgetxattr(fd, "user.note", &value, value.count)
            log.append("user.note " + (length >= 0 ? String(decoding: value[..<length], as: UTF8.self) : "errno \(errno)"))
            return log
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("fchmod ok"), "\(theirs)")
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

/// A file or directory held through the mount whose name was removed, or taken by another
/// entry renamed over it, keeps answering `fstat` with its own attributes (a link count of 0 once
/// no name leads to it), as on a local file system and kernel overlayfs. Directories (which the
/// kernel opens without telling the daemon) and O_PATH descriptors answered ESTALE: the
/// kernel's GETATTR for `fstat` carries no file handle, and the daemon had nothing left to stat.
final class ReplacedOpenFileTests: XCTestCase {
    func testFstatOfAFileWhoseNameWasTakenMatchesKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        for name in ["main-read", "main-written", "main-chmod", "main-unlinked", "main-path"] {
            try Disk.write(fx.inMain(name), "main bundle's \(name)")
        }
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in
            try ReplacedOpenFileTests.exercise(root, [
                ("new-read", O_RDONLY, "rename"), ("new-written", O_RDWR, "rename"),
                ("main-read", O_RDONLY, "rename"), ("main-written", O_RDWR, "rename"),
                ("main-chmod", O_RDONLY, "chmod"), ("main-unlinked", O_RDONLY, "unlink"),
                ("new-path", pb_O_PATH, "unlink"), ("new-path-renamed", pb_O_PATH, "rename"),
                ("main-path", pb_O_PATH, "rename"),
            ])
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("new-read fstat file size 12 mode 750 links 0 owner 0:0 reads new new-read"), "\(theirs)")
    }

    func testFstatOfADirectoryWhoseNameWasTakenMatchesKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        for name in ["main-removed", "main-replaced", "merged-removed", "merged-replaced", "main-path"] {
            try Disk.mkdir(fx.inMain(name))
            XCTAssertEqual(chmod(fx.inMain(name), 0o751), 0)
        }
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in
            for name in ["merged-removed", "merged-replaced"] {
                XCTAssertEqual(chmod(root + "/" + name, 0o705), 0, name)  // copied up: merged
            }
            return try ReplacedOpenFileTests.exercise(root, [
                ("new-removed", O_RDONLY | O_DIRECTORY, "rmdir"), ("new-replaced", O_RDONLY | O_DIRECTORY, "rename"),
                ("main-removed", O_RDONLY | O_DIRECTORY, "rmdir"), ("main-replaced", O_RDONLY | O_DIRECTORY, "rename"),
                ("merged-removed", O_RDONLY | O_DIRECTORY, "rmdir"),
                ("merged-replaced", O_RDONLY | O_DIRECTORY, "rename"),
                ("new-path", pb_O_PATH | O_DIRECTORY, "rmdir"), ("main-path", pb_O_PATH | O_DIRECTORY, "rename"),
            ])
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains { $0.hasPrefix("new-removed fstat directory mode 750") }, "\(theirs)")
    }

    /// Opens each entry (a name starting with "new" is made first), takes its name away (a
    /// rename of another entry of the same kind over it, a chmod that copies it up, an unlink
    /// or rmdir), then reports what `fstat` (and a read, for a file open for reading) give.
    static func exercise(_ root: String, _ cases: [(name: String, flags: Int32, take: String)]) throws -> [String] {
        var log: [String] = []
        for item in cases {
            let path = root + "/" + item.name
            let isDirectory = item.flags & O_DIRECTORY != 0
            if item.name.hasPrefix("new") { try make(path, isDirectory: isDirectory, mode: 0o750, content: "new " + item.name) }
            let fd = open(path, item.flags)
            guard fd >= 0 else { throw TestFailure("open \(item.name): errno \(errno)") }
            defer { close(fd) }
            var before = stat()
            XCTAssertEqual(fstat(fd, &before), 0, item.name)
            switch item.take {
            case "rename":
                let other = root + "/other-" + item.name
                try make(other, isDirectory: isDirectory, mode: 0o700, content: "")
                XCTAssertEqual(rename(other, path), 0, item.name)
            case "chmod": XCTAssertEqual(chmod(path, 0o600), 0, item.name)
            case "rmdir": XCTAssertEqual(rmdir(path), 0, item.name)
            default: XCTAssertEqual(unlink(path), 0, item.name)
            }
            var st = stat()
            guard fstat(fd, &st) == 0 else {
                log.append("\(item.name) fstat errno \(errno)")
                continue
            }
            // not compared: a directory's size (ext4 zeroes it at rmdir, not when a rename
            // replaces it; proxybundle removes a replaced directory with rmdir), and a merged
            // directory's link count (overlayfs shows 1 for every merged directory; proxybundle
            // shows its top layer's, removed or not)
            var line = "\(item.name) fstat " + (isDirectory ? "directory" : "file size \(st.st_size)")
                + " mode \(String(st.st_mode & 0o7777, radix: 8))" + (item.name.hasPrefix("merged") ? "" : " links \(st.st_nlink)")
                + " owner \(st.st_uid):\(st.st_gid)"
            if !isDirectory && item.flags & pb_O_PATH == 0 {
                var buffer = [UInt8](repeating: 0, count: 64)
                let got = pread(fd, &buffer, buffer.count, 0)
                line += " reads " + (got >= 0 ? String(decoding: buffer.prefix(got), as: UTF8.self) : "errno \(errno)")
            }
            log.append(line)
        }
        return log
    }

    private static func make(_ path: String, isDirectory: Bool, mode: mode_t, content: String) throws {
        if isDirectory {
            guard mkdir(path, mode) == 0 else { throw TestFailure("mkdir \(path): errno \(errno)") }
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard fd >= 0 else { throw TestFailure("create \(path): errno \(errno)") }
        defer { close(fd) }
        guard write(fd, content, content.utf8.count) == content.utf8.count else { throw TestFailure("write \(path)") }
    }
}
