import Foundation
import XCTest

/// A whiteout in overlayfs' own form, a 0/0 character device, in the substitution (left there
/// by kernel overlayfs, or by an updater): every way of making an entry of its name works
/// through the mount and gives what kernel overlayfs gives with the same upper directory.
/// Before, only names too long for `.wh.` (where proxybundle itself writes devices) were
/// made over a device; a short name answered EEXIST to create, mkdir, mknod, symlink, link
/// and the rename of a directory onto it.
final class WhiteoutDeviceTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// The names whited out by a device in the upper layer: some hide an entry of the main
    /// bundle, some hide nothing.
    private static let names = ["file", "dir", "link", "fifo", "hard", "moved-file", "moved-dir", "nothing"]

    private static func makeDevices(in upper: String) throws {
        for name in names {
            guard mknod(upper + "/" + name, S_IFCHR | 0o644, 0) == 0 else {
                throw TestFailure("mknod \(upper)/\(name): errno \(errno)")
            }
        }
    }

    func testEntriesAreMadeOverWhiteoutDevicesAsOnKernelOverlayfs() throws {
        for name in Self.names where name != "nothing" {
            try Disk.write(fx.inMain(name == "dir" || name == "moved-dir" ? "\(name)/inside" : name), "main \(name)")
        }
        try Disk.write(fx.inMain("source-file"), "moved")
        try Disk.write(fx.inMain("source-dir/kept"), "kept")
        try Self.makeDevices(in: fx.substitution)
        let kernel = fx.root + "/kernel", upper = fx.root + "/kernel-upper"
        try Disk.mkdir(upper)
        try Self.makeDevices(in: upper)
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(fx, at: kernel, upper: upper)
        try fx.start()
        func exercise(_ root: String) -> [String] {
            func result(_ what: String, _ rc: Int32) -> String { "\(what): \(rc == 0 ? "ok" : String(cString: strerror(errno)))" }
            var outcome: [String] = []
            let fd = open(root + "/file", O_WRONLY | O_CREAT | O_EXCL, 0o644)
            outcome.append(result("create", fd >= 0 ? 0 : -1))
            if fd >= 0 { _ = write(fd, "new", 3); close(fd) }
            outcome.append(result("mkdir", mkdir(root + "/dir", 0o755)))
            outcome.append(result("symlink", symlink("target", root + "/link")))
            outcome.append(result("mkfifo", mkfifo(root + "/fifo", 0o644)))
            outcome.append(result("link", link(root + "/file", root + "/hard")))
            outcome.append(result("rename file", rename(root + "/source-file", root + "/moved-file")))
            for name in Self.names + ["source-file"] {
                let path = root + "/" + name
                guard let st = Disk.lstat(path) else {
                    outcome.append("\(name): absent")
                    continue
                }
                var line = "\(name): mode \(String(st.st_mode, radix: 8)) links \(st.st_mode & S_IFMT == S_IFDIR ? 0 : st.st_nlink)"
                switch st.st_mode & S_IFMT {
                case S_IFREG: line += " " + ((try? Disk.read(path)) ?? "unreadable")
                case S_IFDIR: line += " [" + ((try? Disk.list(path))?.filter { $0 != "." && $0 != ".." }.sorted().joined(separator: ",") ?? "") + "]"
                case S_IFLNK: line += " -> " + (Disk.readLink(path) ?? "?")
                default: break
                }
                outcome.append(line)
            }
            outcome.append("root [" + ((try? Disk.list(root))?.filter { $0 != "." && $0 != ".." }.sorted().joined(separator: ",") ?? "") + "]")
            return outcome
        }
        let theirs = exercise(kernel)
        let mine = exercise(fx.mountpoint)
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(theirs.prefix(6).filter { !$0.hasSuffix(": ok") }, [], "kernel overlayfs made every entry")
        // a main-bundle directory renamed onto the device's name: kernel overlayfs answers
        // EXDEV (without redirect_dir), proxybundle moves it (see docs/MERGED-VIEW.md), and what
        // the device hid stays hidden
        XCTAssertEqual(rename(fx.inMount("source-dir"), fx.inMount("moved-dir")), 0, String(cString: strerror(errno)))
        XCTAssertEqual(try Disk.list(fx.inMount("moved-dir")).filter { $0 != "." && $0 != ".." }, ["kept"])
        XCTAssertNil(Disk.lstat(fx.inMount("source-dir")))
    }
}
