import CSyscalls
import Foundation
import XCTest

/// Names of up to 255 bytes work through the mount, and longer ones answer ENAMETOOLONG, in
/// every operation, as on kernel overlayfs (which reports the upper file system's limit and
/// hides a removed name too long for an OCI `.wh.` file with a 0/0 character device). statfs
/// reported 251 (room for `.wh.`), yet names of 252 to 255 bytes could be created, and then
/// not removed or changed (ENOENT), nor removed from the main bundle.
final class NameLengthTests: XCTestCase {
    static let lengths = [251, 252, 255, 256]

    static func name(_ letter: Character, _ length: Int) -> String { String(repeating: letter, count: length) }

    func testEveryOperationTakesNamesUpTo255BytesAsKernelOverlayfsDoes() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        for length in NameLengthTests.lengths.dropLast() {
            try Disk.write(fx.inMain(NameLengthTests.name("m", length)), "main \(length)")
            try Disk.write(fx.inMain(NameLengthTests.name("r", length)), "main \(length)")
            try Disk.write(fx.inMain(NameLengthTests.name("c", length)), "main \(length)")
            try Disk.mkdir(fx.inMain(NameLengthTests.name("d", length)))
            try Disk.write(fx.inMain(NameLengthTests.name("d", length) + "/inside"), "hidden")
            try Disk.write(fx.inMain(NameLengthTests.name("x", length)), "main \(length)")
        }
        let (mine, theirs) = try KernelOverlay.onBoth(fx) { root in try NameLengthTests.exercise(root) }
        XCTAssertEqual(mine, theirs)
        XCTAssertTrue(theirs.contains("statfs namelen 255"), "\(theirs)")
        XCTAssertTrue(theirs.contains("255 unlink main ok"), "\(theirs)")
        // the whiteouts of such names are devices, read back by the next mount (inode numbers
        // aside: the mount's device changes, and copies show their own numbers after a remount)
        let tree = { try OverlayTree.walk(fx.mountpoint).mapValues { entry in var e = entry; e.inode = ""; return e } }
        let before = try tree()
        _ = fx.stop()
        try fx.start()
        XCTAssertEqual(try tree(), before)
    }

    /// A main-bundle directory of a 255-byte name can be renamed (kernel overlayfs answers EXDEV
    /// for any such directory), and the name it leaves is whited out.
    func testMainBundleDirectoryOfA255ByteNameCanBeRenamed() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let long = NameLengthTests.name("e", 255)
        try Disk.mkdir(fx.inMain(long))
        try Disk.write(fx.inMain(long + "/inside"), "main")
        try fx.start()
        XCTAssertEqual(rename(fx.inMount(long), fx.inMount("moved")), 0, "errno \(errno)")
        var st = stat()
        XCTAssertEqual(lstat(fx.inMount(long), &st), -1)
        XCTAssertEqual(try Disk.read(fx.inMount("moved/inside")), "main")
        XCTAssertEqual(mkdir(fx.inMount(long), 0o755), 0, "errno \(errno)")
        XCTAssertEqual(try Disk.list(fx.inMount(long)), [])
    }

    static func exercise(_ root: String) throws -> [String] {
        var log: [String] = []
        var fs = statvfs()
        XCTAssertEqual(statvfs(root, &fs), 0)
        log.append("statfs namelen \(fs.f_namemax)")
        for length in lengths {
            func note(_ what: String, _ result: Int32) {
                log.append("\(length) \(what) " + (result >= 0 ? "ok" : String(cString: strerror(errno))))
            }
            let at = { (letter: Character) in root + "/" + name(letter, length) }
            let fd = open(at("f"), O_RDWR | O_CREAT | O_EXCL, 0o644)
            note("create", fd)
            if fd >= 0 { close(fd) }
            note("stat new", { var st = stat(); return lstat(at("f"), &st) }())
            note("chmod", chmod(at("f"), 0o600))
            note("chown", chown(at("f"), 1, 1))
            note("lchown", lchown(at("f"), 2, 2))
            note("truncate", truncate(at("f"), 3))
            note("setxattr", setxattr(at("f"), "user.x", "1", 1, 0))
            var times = [timespec(tv_sec: 7, tv_nsec: 0), timespec(tv_sec: 8, tv_nsec: 0)]
            note("utimensat", utimensat(AT_FDCWD, at("f"), &times, 0))
            note("link", link(at("f"), at("h")))
            note("rename", rename(at("h"), at("g")))
            note("unlink", unlink(at("f")))
            note("unlink renamed", unlink(at("g")))
            note("mkdir", mkdir(at("n"), 0o755))
            note("rmdir", rmdir(at("n")))
            note("mkfifo", mkfifo(at("p"), 0o644))
            note("unlink fifo", unlink(at("p")))
            note("mknod", mknod(at("q"), S_IFREG | 0o644, 0))
            note("symlink", symlink("target", at("s")))
            note("unlink symlink", unlink(at("s")))
            // names of the main bundle
            note("stat main", { var st = stat(); return lstat(at("m"), &st) }())
            note("open main", { let f = open(at("m"), O_RDONLY); if f >= 0 { close(f) }; return f }())
            note("chmod main", chmod(at("c"), 0o600))
            note("unlink main", unlink(at("m")))
            note("stat unlinked main", { var st = stat(); return lstat(at("m"), &st) }())
            note("create over unlinked main", { let f = open(at("m"), O_RDWR | O_CREAT | O_EXCL, 0o644); if f >= 0 { close(f) }; return f }())
            note("rename main", rename(at("r"), root + "/renamed-\(length)"))
            note("stat renamed main", { var st = stat(); return lstat(at("r"), &st) }())
            note("rename back", rename(root + "/renamed-\(length)", at("r")))
            note("rmdir main", rmdir(at("d")))
            note("mkdir over removed main", mkdir(at("d"), 0o700))
            note("stat made over removed main", { var st = stat(); return lstat(at("d") + "/inside", &st) }())
            note("unlink copied-up main", unlink(at("c")))
            note("link over unlinked main", link(at("m"), at("c")))
            note("unlink main to rename over", unlink(at("x")))
            note("mkdir to rename", mkdir(at("y"), 0o755))
            note("rename directory over unlinked main", rename(at("y"), at("x")))
            note("rmdir renamed directory", rmdir(at("x")))
        }
        log.append("listing " + ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).map { "\($0.first ?? "?")\($0.utf8.count)" }.sorted().joined(separator: " "))
        return log
    }
}
