import CSyscalls
import Foundation
import XCTest

/// Entries deeper than PATH_MAX (4,096 bytes) below a layer's root change like any other,
/// reached relative to a descriptor opened deep inside the mount, as on kernel overlayfs:
/// chmod, chown, lchown, truncate, link and rmdir answered ENAMETOOLONG (the daemon reached the
/// layer by a path from its root), while create, mkdir and unlink worked.
final class LongPathTests: XCTestCase {
    /// 24 directories of 200 bytes: 4,824 bytes from the root before the entries' own names.
    static let levels = (0..<24).map { String(repeating: Character(UnicodeScalar(UInt8(0x61 + $0 % 26))), count: 200) }

    func testChangesDeeperThanPathMaxMatchKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let bottom = try LongPathTests.descend(fx.main, through: ["main"] + LongPathTests.levels, making: true)
        try LongPathTests.populate(bottom)
        close(bottom)
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in
            var log: [String] = []
            let made = try LongPathTests.descend(root, through: ["new"] + LongPathTests.levels, making: true)
            try LongPathTests.populate(made)
            log += try LongPathTests.exercise(made, "new")
            close(made)
            let main = try LongPathTests.descend(root, through: ["main"] + LongPathTests.levels, making: false)
            log += try LongPathTests.exercise(main, "main")
            close(main)
            return log
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("main chmod ok"), "\(theirs)")
        // a main-bundle directory down there is materialized and renamed
        let main = try LongPathTests.descend(fx.mountpoint, through: ["main"] + LongPathTests.levels, making: false)
        defer { close(main) }
        XCTAssertEqual(renameat(main, "moved", main, "moved2"), 0, "errno \(errno)")
        var st = stat()
        XCTAssertEqual(fstatat(main, "moved2", &st, 0), 0, "errno \(errno)")
    }

    /// A descriptor of the directory `names` below `root`, each opened relative to the one
    /// before (made first with `making`).
    static func descend(_ root: String, through names: [String], making: Bool) throws -> Int32 {
        var fd = open(root, O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { throw TestFailure("open \(root): errno \(errno)") }
        for name in names {
            if making && mkdirat(fd, name, 0o755) != 0 && errno != EEXIST { throw TestFailure("mkdirat: errno \(errno)") }
            let next = openat(fd, name, O_RDONLY | O_DIRECTORY)
            close(fd)
            guard next >= 0 else { throw TestFailure("openat \(name.prefix(8)): errno \(errno)") }
            fd = next
        }
        return fd
    }

    /// Files, a symlink and directories to change in `dir`.
    static func populate(_ dir: Int32) throws {
        for name in ["f", "g", "h", "x"] {
            let fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            guard fd >= 0 else { throw TestFailure("create \(name): errno \(errno)") }
            _ = write(fd, "content of \(name)", 12)
            close(fd)
        }
        guard symlinkat("f", dir, "l") == 0, mkdirat(dir, "sub", 0o755) == 0, mkdirat(dir, "moved", 0o755) == 0 else {
            throw TestFailure("populate: errno \(errno)")
        }
    }

    static func exercise(_ dir: Int32, _ label: String) throws -> [String] {
        var log: [String] = []
        func note(_ what: String, _ result: Int32) {
            log.append("\(label) \(what) " + (result >= 0 ? "ok" : String(cString: strerror(errno))))
        }
        let proc = "/proc/self/fd/\(dir)/"
        note("chmod", fchmodat(dir, "f", 0o600, 0))
        note("chown", fchownat(dir, "f", 1, 2, 0))
        note("lchown", fchownat(dir, "l", 3, 4, AT_SYMLINK_NOFOLLOW))
        note("truncate", truncate(proc + "g", 3))
        note("setxattr", setxattr(proc + "g", "user.note", "yes", 3, 0))
        var times = [timespec(tv_sec: 5, tv_nsec: 0), timespec(tv_sec: 6, tv_nsec: 0)]
        note("utimensat", utimensat(dir, "h", &times, 0))
        note("link", linkat(dir, "h", dir, "h2", 0))
        note("rename", renameat(dir, "x", dir, "x2"))
        // (kernel overlayfs answers EXDEV for a main-bundle directory; see the test)
        if label == "new" { note("rename directory", renameat(dir, "moved", dir, "moved2")) }
        note("unlink", unlinkat(dir, "x2", 0))
        note("rmdir", unlinkat(dir, "sub", AT_REMOVEDIR))
        note("mkdir", mkdirat(dir, "made", 0o700))
        note("create", { let f = openat(dir, "c", O_WRONLY | O_CREAT | O_EXCL, 0o640); if f >= 0 { close(f) }; return f }())
        let listing = fdopendir(dup(dir))
        var names: [String] = []
        while let listing, let entry = readdir(listing) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name == "." || name == ".." { continue }
            var st = stat()
            let found = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0
            names.append("\(name) " + (found ? "mode \(String(st.st_mode, radix: 8)) size \(st.st_size) owner \(st.st_uid):\(st.st_gid)"
                + " links \(st.st_mode & S_IFMT == S_IFDIR ? 0 : st.st_nlink)" + (name == "h" ? " mtime \(st.st_mtim.tv_sec)" : "") : "errno \(errno)"))
        }
        if let listing { closedir(listing) }
        log.append("\(label) entries: " + names.sorted().joined(separator: ", "))
        var value = [UInt8](repeating: 0, count: 8)
        let got = getxattr(proc + "g", "user.note", &value, value.count)
        log.append("\(label) getxattr " + (got >= 0 ? String(decoding: value.prefix(got), as: UTF8.self) : "errno \(errno)"))
        return log
    }
}
