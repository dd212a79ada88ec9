import CSyscalls
import Foundation
import XCTest

/// proxybundle against the kernel's overlayfs on the same pair of layers.
///
/// The substitution is copied (`cp -a`) and converted to overlayfs' own forms (`.wh.NAME` becomes
/// a 0/0 character device NAME, `.wh..wh..opq` becomes `trusted.overlay.opaque=y` on its
/// directory), then mounted read-only with the copy above the main bundle as two lower layers.
/// Both trees are walked with plain syscalls and must agree on every path and attribute.
///
/// Deliberately not compared, because they legitimately differ between two file systems:
/// inode and device numbers (hard links are compared as groups of paths instead), `st_nlink`
/// and `st_size` of directories, atime and ctime (the converted copy is a new file), `st_blocks`
/// and `st_blksize`. Directory mtimes are compared: the conversion restores them.
final class OverlayDifferentialTests: XCTestCase {
    func testHandwrittenAndGeneratedLayersMatchKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try OverlayScenario.buildHandwritten(main: fx.main, substitution: fx.substitution)
        var generator = OverlayScenario.Generator(seed: 0x0b5e_55ed_5eed_2024)
        try generator.build(main: fx.main + "/gen", substitution: fx.substitution + "/gen")
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mount(fx, at: kernel)
        try fx.start()
        try assertSameTree(fx.mountpoint, kernel)
    }

    func testExampleBundleMatchesKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Examples").path
        try OverlayScenario.copyContents(of: examples + "/Demo.app", into: fx.main)
        try OverlayScenario.copyContents(of: examples + "/patch", into: fx.substitution)
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mount(fx, at: kernel)
        try fx.start()
        let entries = try assertSameTree(fx.mountpoint, kernel)
        // the example has a whiteout and an opaque directory: make sure they were exercised
        XCTAssertNil(entries["Images/splash.png"])
        XCTAssertNotNil(entries["Images/banner.png"])
        XCTAssertNil(entries["Fonts.bundle/Bold.ttf"])
    }

    /// The comparison itself must notice a difference: two kernel overlays, one of which was
    /// converted without one whiteout and without the opaque marker, must not compare equal.
    func testComparisonReportsDifferences() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try OverlayScenario.buildHandwritten(main: fx.main, substitution: fx.substitution)
        let good = fx.root + "/good", bad = fx.root + "/bad"
        defer { Unmounter.force(good); Unmounter.force(bad) }
        try KernelOverlay.mount(fx, at: good)
        try KernelOverlay.mount(fx, at: bad, converted: fx.root + "/converted-bad",
                                keep: [".wh.gone-dir", ".wh..wh..opq"])
        let differences = try OverlayTree.differences(OverlayTree.walk(bad), OverlayTree.walk(good),
                                                      leftName: "bad", rightName: "good")
        let text = differences.joined(separator: "\n")
        XCTAssertTrue(text.contains("only in bad: .wh.gone-dir"), text)
        XCTAssertTrue(text.contains("only in bad: gone-dir/a"), text)
        XCTAssertTrue(text.contains("only in bad: opaque/old-file"), text)
        XCTAssertTrue(text.contains("only in bad: opaque/sub/old-in-sub"), text)
        XCTAssertFalse(text.contains("root-whiteout"), text)
    }

    @discardableResult
    private func assertSameTree(_ proxy: String, _ kernel: String,
                                file: StaticString = #filePath, line: UInt = #line) throws -> [String: OverlayTree.Entry] {
        try OverlayTree.assertSame(proxy, kernel, file: file, line: line)
    }
}

// MARK: - the layers

enum OverlayScenario {
    /// Fixed times, with nanoseconds, so a time that is served from the wrong layer shows.
    static let baseTime = 1_600_000_000

    static func setTime(_ path: String, _ seconds: Int, _ nanoseconds: Int) throws {
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw TestFailure("utimensat \(path): errno \(errno)")
        }
    }

    static func setOwner(_ path: String, _ uid: uid_t, _ gid: gid_t) throws {
        guard lchown(path, uid, gid) == 0 else { throw TestFailure("lchown \(path): errno \(errno)") }
    }

    static func setMode(_ path: String, _ mode: mode_t) throws {
        guard chmod(path, mode) == 0 else { throw TestFailure("chmod \(path): errno \(errno)") }
    }

    static func bytes(_ path: String, count: Int, seed: UInt64) throws {
        try Disk.makeParent(path)
        var state = seed
        var data = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            if i % 8 == 0 { state = state &* 6364136223846793005 &+ 1442695040888963407 }
            data[i] = UInt8(truncatingIfNeeded: state >> UInt64(8 * (i % 8)))
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw TestFailure("create \(path): errno \(errno)") }
        defer { close(fd) }
        guard write(fd, data, count) == count else { throw TestFailure("write \(path): errno \(errno)") }
    }

    static func link(_ existing: String, _ new: String) throws {
        try Disk.makeParent(new)
        guard Glibc.link(existing, new) == 0 else { throw TestFailure("link \(new): errno \(errno)") }
    }

    static func copyContents(of source: String, into destination: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            let result = try Spawn.run("/bin/cp", ["-a", source + "/" + name, destination + "/"])
            guard result.status == 0 else { throw TestFailure("cp -a \(name): \(result.error)") }
        }
    }

    /// Every kind of shadowing, whiteout and attribute by hand; names say what they test.
    static func buildHandwritten(main: String, substitution: String) throws {
        func m(_ p: String) -> String { main + "/" + p }
        func p(_ q: String) -> String { substitution + "/" + q }

        // shadowed files with different content, sizes, modes, owners and times
        try Disk.write(m("shadowed.txt"), "main version\n")
        try Disk.write(p("shadowed.txt"), "the patch's version, which is longer\n", mode: 0o600)
        try setTime(p("shadowed.txt"), baseTime + 11, 123_456_789)
        try bytes(m("big.bin"), count: 1_300_000, seed: 1)
        try bytes(p("big.bin"), count: 300_001, seed: 2)
        try bytes(m("shrinks.bin"), count: 200_000, seed: 3)
        try Disk.write(p("shrinks.bin"), "")
        try Disk.write(m("owned.txt"), "main owner")
        try setOwner(m("owned.txt"), 1000, 1000)
        try Disk.write(p("owned.txt"), "patch owner")
        try setOwner(p("owned.txt"), 1234, 5678)
        try Disk.write(m("only-main.txt"), "only in main\n")
        try setTime(m("only-main.txt"), baseTime + 1, 1)
        try Disk.write(p("only-patch.txt"), "only in the patch\n")
        try setTime(p("only-patch.txt"), baseTime + 2, 999_999_999)
        try Disk.write(m("Résumé with spaces.txt"), "unicode main")
        try Disk.write(p("Résumé with spaces.txt"), "unicode patch")

        // modes
        try Disk.write(m("modes/read-only"), "0444 in main", mode: 0o444)
        try Disk.write(m("modes/run.sh"), "#!/bin/sh\necho main\n", mode: 0o755)
        try Disk.write(p("modes/run.sh"), "#!/bin/sh\necho patched\n", mode: 0o755)
        try Disk.write(m("modes/private"), "0600 in main", mode: 0o600)
        try Disk.write(m("modes/was-private"), "0600 in main", mode: 0o600)
        try Disk.write(p("modes/was-private"), "0444 in patch", mode: 0o444)
        try Disk.write(p("modes/patch-read-only"), "0444 in patch", mode: 0o444)
        try Disk.write(m("modes/setuid"), "suid", mode: 0o755)
        try setMode(m("modes/setuid"), 0o4755)
        try Disk.mkdir(m("modes/sticky"), mode: 0o777)
        try setMode(m("modes/sticky"), 0o1777)
        try Disk.mkdir(p("modes/setgid-dir"), mode: 0o755)
        try setMode(p("modes/setgid-dir"), 0o2750)
        try Disk.write(m("modes/nothing"), "0000", mode: 0)
        try setMode(p("modes"), 0o750)  // a merged directory takes the patch's attributes

        // directories merged at several depths, and directories in one layer only
        try Disk.write(m("nest/top.txt"), "main top")
        try Disk.write(m("nest/a/a.txt"), "main a")
        try Disk.write(m("nest/a/b/b.txt"), "main b")
        try Disk.write(m("nest/a/b/c/deep.txt"), "main deep")
        try Disk.write(m("nest/a/b/c/kept.txt"), "main kept")
        try Disk.write(m("nest/a/main-only-dir/x"), "main only dir")
        try Disk.write(p("nest/a/b/c/deep.txt"), "patched deep, longer")
        try Disk.write(p("nest/a/b/new.txt"), "patch new in b")
        try Disk.write(p("nest/a/b/c/d/e/f/deepest.txt"), "only in the patch, six levels down")
        try Disk.whiteout(p("nest/a/b/c"), "kept-not")  // hides nothing
        try Disk.whiteout(p("nest/a/b"), "b.txt")
        try Disk.write(m("dir-only-main/x"), "x")
        try Disk.write(m("dir-only-main/sub/y"), "y")
        try Disk.write(p("dir-only-patch/z"), "z")
        try Disk.write(p("dir-only-patch/sub/w"), "w")
        try Disk.whiteout(p("dir-only-patch"), "ghost")  // nothing below to hide
        try setTime(m("nest/a/b/c"), baseTime + 100, 100)
        try setTime(p("nest/a/b/c"), baseTime + 200, 200)
        try setTime(m("dir-only-main/sub"), baseTime + 300, 300)

        // type changes both ways
        try Disk.write(m("file-then-dir"), "a file in main")
        try Disk.write(p("file-then-dir/child"), "a child in the patch's directory")
        try Disk.whiteout(p("file-then-dir"), "ghost")
        guard mknod(p("file-then-dir/device-ghost"), S_IFCHR, 0) == 0 else { throw TestFailure("mknod: errno \(errno)") }
        try Disk.write(m("dir-then-file/child"), "a child in main's directory")
        try Disk.write(m("dir-then-file/sub/grandchild"), "grandchild")
        try Disk.write(p("dir-then-file"), "a file in the patch")
        try Disk.write(m("dir-then-symlink/child"), "main")
        try Disk.symlink(p("dir-then-symlink"), to: "nest/a")

        // symlinks in both layers
        try Disk.symlink(m("links/relative"), to: "../shadowed.txt")
        try Disk.symlink(m("links/absolute"), to: "/etc/hostname")
        try Disk.symlink(m("links/dangling"), to: "nowhere/missing")
        try Disk.symlink(m("links/to-dir"), to: "../nest")
        try Disk.symlink(m("links/shadowed-link"), to: "relative")
        try Disk.symlink(p("links/shadowed-link"), to: "absolute-but-longer")
        try Disk.write(m("links/file-becomes-link"), "a file in main")
        try Disk.symlink(p("links/file-becomes-link"), to: "../only-main.txt")
        try Disk.symlink(m("links/link-becomes-file"), to: "../only-main.txt")
        try Disk.write(p("links/link-becomes-file"), "a file in the patch")
        try Disk.symlink(p("links/patch-relative"), to: "./relative")
        try Disk.symlink(p("links/patch-absolute"), to: "/usr/share")
        try Disk.symlink(p("links/patch-dangling"), to: "/nonexistent/file")
        try Disk.symlink(m("links/owned-link"), to: "x")
        try setOwner(m("links/owned-link"), 42, 43)
        try setTime(m("links/owned-link"), baseTime + 5, 5)
        try setTime(p("links/patch-relative"), baseTime + 6, 6)

        // a whiteout at the root hides only the root's name
        try Disk.write(m("root-whiteout"), "hidden at the root")
        try Disk.write(m("sub1/root-whiteout"), "kept in sub1 (merged)")
        try Disk.write(m("sub2/deeper/root-whiteout"), "kept in sub2/deeper (main only)")
        try Disk.write(p("sub1/other"), "makes sub1 merged")
        try Disk.whiteout(substitution, "root-whiteout")
        try Disk.whiteout(substitution, "absent-in-main")

        // a whiteout hiding a directory
        try Disk.write(m("gone-dir/a"), "a")
        try Disk.write(m("gone-dir/b/c"), "c")
        try Disk.whiteout(substitution, "gone-dir")
        // a whiteout in a nested merged directory, hiding a symlink
        try Disk.whiteout(p("links"), "dangling")

        // an opaque directory with new entries, and a directory below it in both layers
        try Disk.write(m("opaque/old-file"), "hidden")
        try Disk.write(m("opaque/sub/old-in-sub"), "hidden")
        try Disk.write(m("opaque/kept-name"), "main kept-name, hidden")
        try Disk.opaque(p("opaque"))
        try Disk.write(p("opaque/new-file"), "new")
        try Disk.write(p("opaque/kept-name"), "the patch's")
        try Disk.write(p("opaque/sub/new-in-sub"), "new below an opaque directory")

        // overlayfs' own forms in the substitution
        try Disk.write(m("device-whiteout"), "hidden by a 0/0 character device")
        for name in ["device-whiteout", "device-whiteout-of-nothing", "opaque/device-whiteout-in-opaque"] {
            guard mknod(p(name), S_IFCHR, 0) == 0 else { throw TestFailure("mknod \(name): errno \(errno)") }
        }
        try Disk.write(m("xattr-opaque/old"), "hidden by trusted.overlay.opaque")
        try Disk.write(p("xattr-opaque/new"), "new")
        guard setxattr(p("xattr-opaque"), "trusted.overlay.opaque", "y", 1, 0) == 0 else {
            throw TestFailure("setxattr: errno \(errno)")
        }

        try Disk.write(m("both-opaque/old"), "hidden twice over")
        try Disk.write(p("both-opaque/new"), "new")
        try Disk.opaque(p("both-opaque"))
        guard setxattr(p("both-opaque"), "trusted.overlay.opaque", "y", 1, 0) == 0 else {
            throw TestFailure("setxattr: errno \(errno)")
        }

        // empty directories
        try Disk.mkdir(m("empty-main"))
        try Disk.mkdir(p("empty-patch"))
        try Disk.mkdir(m("empty-both"))
        try Disk.mkdir(p("empty-both"), mode: 0o700)
        try Disk.write(m("full-main-empty-patch/file"), "merged under an empty patch directory")
        try Disk.mkdir(p("full-main-empty-patch"))
        try Disk.write(m("emptied/file"), "hidden")
        try Disk.mkdir(p("emptied"))
        try Disk.opaque(p("emptied"))

        // hard links
        try Disk.write(m("hard/a"), "linked three times")
        try link(m("hard/a"), m("hard/b"))
        try link(m("hard/a"), m("other/hard-c"))
        try Disk.write(p("hard/b"), "b shadowed in the patch")
        try Disk.write(m("hard/d"), "linked twice, one name whited out")
        try link(m("hard/d"), m("hard/e"))
        try Disk.whiteout(p("hard"), "e")
        try Disk.write(p("patch-hard/one"), "linked in the patch")
        try link(p("patch-hard/one"), p("patch-hard/two"))

        // a FIFO and extended attributes
        guard mkfifo(m("fifo"), 0o640) == 0 else { throw TestFailure("mkfifo: errno \(errno)") }
        try Disk.write(m("xattrs/main"), "x")
        try Disk.write(p("xattrs/patch"), "x")
        try Disk.write(m("xattrs/both"), "x")
        try Disk.write(p("xattrs/both"), "y")
        for (path, value) in [(m("xattrs/main"), "m"), (p("xattrs/patch"), "p"), (m("xattrs/both"), "main"),
                              (p("xattrs/both"), "patch")] {
            guard setxattr(path, "user.origin", value, value.utf8.count, 0) == 0 else {
                throw TestFailure("setxattr \(path): errno \(errno)")
            }
        }

        // times last, so that nothing above changes them again
        try setTime(m("modes/read-only"), baseTime - 86_400, 500_000_000)
        try setTime(p("modes/run.sh"), baseTime + 7, 7)
        try setTime(m("hard/a"), baseTime + 8, 8)
        try setTime(m("nest/a/b/c"), baseTime + 100, 100)
        try setTime(p("nest/a/b/c"), baseTime + 200, 200)
    }

    /// A few hundred entries drawn from a fixed seed: files and directories in main, and a patch
    /// that shadows, hides, retypes and adds at random, always as valid input (never `.wh.NAME`
    /// beside NAME).
    struct Generator {
        var state: UInt64

        init(seed: UInt64) { state = seed }

        mutating func next() -> UInt64 {  // SplitMix64
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }

        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

        mutating func mode() -> mode_t { [0o644, 0o644, 0o600, 0o755, 0o444, 0o640][below(6)] }

        mutating func file(_ path: String) throws {
            let size = chance(10) ? 100_000 + below(200_000) : below(3000)
            try OverlayScenario.bytes(path, count: size, seed: next())
            try OverlayScenario.setMode(path, mode())
            if chance(20) { try OverlayScenario.setOwner(path, 1000 + uid_t(below(3)), 1000 + gid_t(below(3))) }
            if chance(60) { try OverlayScenario.setTime(path, OverlayScenario.baseTime + below(1_000_000), below(1_000_000_000)) }
        }

        mutating func build(main: String, substitution: String) throws {
            let tree = try buildMain(main)
            try buildLayer(substitution, over: tree)
        }

        /// The main bundle: directories up to four levels deep, each with a few files, and a
        /// hard link. Returns its directories ("" for the root) and files.
        mutating func buildMain(_ main: String) throws -> (directories: [String], files: [String]) {
            var directories = [""]
            var files: [String] = []
            for index in 0..<90 {
                let parent = directories[below(directories.count)]
                guard parent.split(separator: "/").count < 4 else { continue }
                directories.append(parent.isEmpty ? "dir\(index)" : parent + "/dir\(index)")
            }
            for directory in directories {
                try Disk.mkdir(main + "/" + directory)
                for index in 0..<(1 + below(6)) {
                    let path = directory.isEmpty ? "file\(index)" : directory + "/file\(index)"
                    try file(main + "/" + path)
                    files.append(path)
                }
            }
            try link(main + "/" + files[0], main + "/" + files[0] + ".hardlink")
            return (directories, files)
        }

        /// A layer (a patch or the substitution) over the main bundle's `tree` (and over any
        /// layer already made over it): whiteouts, replaced files, retyped entries, opaque and
        /// new directories, new files.
        mutating func buildLayer(_ layer: String, over tree: (directories: [String], files: [String])) throws {
            let (directories, files) = tree
            // visit main's directories parent first; a hidden or retyped directory takes its
            // subtree with it
            var gone: [String] = []
            func isGone(_ path: String) -> Bool { gone.contains { path == $0 || path.hasPrefix($0 + "/") } }
            func name(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }
            func parent(_ path: String) -> String { (path as NSString).deletingLastPathComponent }
            for directory in directories.dropFirst() where !isGone(directory) {
                switch below(100) {
                case 0..<8:
                    try Disk.whiteout(layer + "/" + parent(directory), name(directory))
                    gone.append(directory)
                case 8..<12:
                    try file(layer + "/" + directory)
                    gone.append(directory)
                case 12..<15:
                    try Disk.symlink(layer + "/" + directory, to: chance(50) ? "../elsewhere" : "/usr")
                    gone.append(directory)
                case 15..<22:
                    try Disk.mkdir(layer + "/" + directory, mode: mode() | 0o100)
                    try Disk.opaque(layer + "/" + directory)
                    try file(layer + "/" + directory + "/opaque-new")
                case 22..<60:
                    try Disk.mkdir(layer + "/" + directory, mode: chance(20) ? 0o700 : 0o755)
                default:
                    break
                }
            }
            for path in files where !isGone(parent(path)) {
                switch below(100) {
                case 0..<20: try file(layer + "/" + path)
                case 20..<30: try Disk.whiteout(layer + "/" + parent(path), name(path))
                case 30..<34: try Disk.symlink(layer + "/" + path, to: chance(50) ? name(path) + ".other" : "/etc/passwd")
                case 34..<37: try file(layer + "/" + path + "/now-a-directory")
                default: break
                }
                if chance(8) { try file(layer + "/" + path + ".added") }
            }
            for index in 0..<20 {
                let directory = directories[below(directories.count)]
                guard !isGone(directory) else { continue }
                let path = (directory.isEmpty ? "" : directory + "/") + "layer-only-\(index)"
                if chance(30) {
                    try file(layer + "/" + path + "/inside")
                } else {
                    try file(layer + "/" + path)
                }
            }
        }
    }
}
