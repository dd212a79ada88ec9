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
        try OverlayScenario.buildHandwritten(main: fx.main, patch: fx.substitution)
        var generator = OverlayScenario.Generator(seed: 0x0b5e_55ed_5eed_2024)
        try generator.build(main: fx.main + "/gen", patch: fx.substitution + "/gen")
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
        try OverlayScenario.buildHandwritten(main: fx.main, patch: fx.substitution)
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
    static func buildHandwritten(main: String, patch: String) throws {
        func m(_ p: String) -> String { main + "/" + p }
        func p(_ q: String) -> String { patch + "/" + q }

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
        try Disk.whiteout(patch, "root-whiteout")
        try Disk.whiteout(patch, "absent-in-main")

        // a whiteout hiding a directory
        try Disk.write(m("gone-dir/a"), "a")
        try Disk.write(m("gone-dir/b/c"), "c")
        try Disk.whiteout(patch, "gone-dir")
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

        mutating func build(main: String, patch: String) throws {
            let tree = try buildMain(main)
            try buildPatch(patch, over: tree)
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

        /// A patch over the main bundle's `tree` (and over any patch already made over it):
        /// whiteouts, replaced files, retyped entries, opaque and new directories, new files.
        mutating func buildPatch(_ patch: String, over tree: (directories: [String], files: [String])) throws {
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
                    try Disk.whiteout(patch + "/" + parent(directory), name(directory))
                    gone.append(directory)
                case 8..<12:
                    try file(patch + "/" + directory)
                    gone.append(directory)
                case 12..<15:
                    try Disk.symlink(patch + "/" + directory, to: chance(50) ? "../elsewhere" : "/usr")
                    gone.append(directory)
                case 15..<22:
                    try Disk.mkdir(patch + "/" + directory, mode: mode() | 0o100)
                    try Disk.opaque(patch + "/" + directory)
                    try file(patch + "/" + directory + "/opaque-new")
                case 22..<60:
                    try Disk.mkdir(patch + "/" + directory, mode: chance(20) ? 0o700 : 0o755)
                default:
                    break
                }
            }
            for path in files where !isGone(parent(path)) {
                switch below(100) {
                case 0..<20: try file(patch + "/" + path)
                case 20..<30: try Disk.whiteout(patch + "/" + parent(path), name(path))
                case 30..<34: try Disk.symlink(patch + "/" + path, to: chance(50) ? name(path) + ".other" : "/etc/passwd")
                case 34..<37: try file(patch + "/" + path + "/now-a-directory")
                default: break
                }
                if chance(8) { try file(patch + "/" + path + ".added") }
            }
            for index in 0..<20 {
                let directory = directories[below(directories.count)]
                guard !isGone(directory) else { continue }
                let path = (directory.isEmpty ? "" : directory + "/") + "patch-only-\(index)"
                if chance(30) {
                    try file(patch + "/" + path + "/inside")
                } else {
                    try file(patch + "/" + path)
                }
            }
        }
    }
}

// MARK: - the kernel's overlay

enum KernelOverlay {
    /// Copies the fixture's substitution, converts it to overlayfs' forms and mounts it above the
    /// main bundle, read-only. Skips the test when overlayfs cannot be mounted here.
    static func mount(_ fx: MountFixture, at mountpoint: String, converted: String? = nil,
                      keep: Set<String> = []) throws {
        try mountStack([fx.substitution, fx.main], at: mountpoint, scratch: converted ?? fx.root + "/converted", keep: keep)
    }

    /// Mounts `layers` (top first; each but the last copied under `scratch` and converted to
    /// overlayfs' forms) as one read-only kernel overlay at `mountpoint`: what proxybundle must
    /// show for the same stack. Skips the test when overlayfs cannot be mounted here.
    static func mountStack(_ layers: [String], at mountpoint: String, scratch: String, keep: Set<String> = []) throws {
        let lowers = try convertedStack(layers, scratch: scratch, keep: keep)
        try Disk.mkdir(mountpoint)
        let options = "lowerdir=" + lowers.joined(separator: ":")
        guard Glibc.mount("overlay", mountpoint, "overlay", UInt(MS_RDONLY), options) == 0 else {
            throw MachineSkip.overlayfs(errno, options: options)
        }
    }

    /// `layers` as overlayfs' lower directories: each but the last copied (`cp -a`) to
    /// `scratch`/N and converted (see `convert`); the last as it is.
    static func convertedStack(_ layers: [String], scratch: String, keep: Set<String> = []) throws -> [String] {
        var result: [String] = []
        for (index, layer) in layers.enumerated() {
            guard index < layers.count - 1 else {
                result.append(layer)
                break
            }
            let copy = layers.count == 2 ? scratch : scratch + "/\(index)"
            try Disk.makeParent(copy)
            let made = try Spawn.run("/bin/cp", ["-a", layer, copy])
            guard made.status == 0 else { throw TestFailure("cp -a: \(made.error)") }
            // the roots below, down to the first opaque one
            var below: [String] = []
            for root in layers[(index + 1)...] {
                below.append(root)
                if isOpaque(root, names: (try? Disk.list(root)) ?? [], keep: keep) { break }
            }
            try convert(copy, original: layer, below: below, keep: keep)
            result.append(copy)
        }
        return result
    }

    /// A writable overlay of the fixture's main bundle at `mountpoint`, with `upper` (made empty
    /// if missing) and a work directory beside the mountpoint. Skips the test when overlayfs
    /// cannot be mounted here.
    static func mountWritable(_ fx: MountFixture, at mountpoint: String, upper: String) throws {
        try mountWritable(lowers: [fx.main], at: mountpoint, upper: upper)
    }

    /// A writable overlay of `lowers` (overlayfs' lower directories, top first) at `mountpoint`,
    /// with `upper` and a work directory beside the mountpoint. `extra` options are appended;
    /// `flags` are mount(2)'s (MS_NOATIME, ...).
    static func mountWritable(lowers: [String], at mountpoint: String, upper: String, extra: String = "",
                              flags: UInt = 0) throws {
        let work = mountpoint + "-work"
        for directory in [mountpoint, upper, work] where Disk.lstat(directory) == nil { try Disk.mkdir(directory) }
        let options = "lowerdir=\(lowers.joined(separator: ":")),upperdir=\(upper),workdir=\(work)" + extra
        guard Glibc.mount("overlay", mountpoint, "overlay", flags, options) == 0 else {
            throw MachineSkip.overlayfs(errno, options: options)
        }
    }

    /// Starts the fixture's mount and a writable kernel overlay of the same main bundle (with an
    /// empty upper directory), runs `exercise` on the root of each, and returns what each gave.
    static func onBoth(_ fx: MountFixture, options: [String] = [],
                       _ exercise: (String) throws -> [String]) throws -> (mine: [String], theirs: [String]) {
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try mountWritable(fx, at: kernel, upper: fx.root + "/kernel-upper")
        try fx.start(options)
        return (try exercise(fx.mountpoint), try exercise(kernel))
    }

    /// Converts `copy`, a copy of the layer directory `original`, to overlayfs' forms:
    /// `.wh.NAME` becomes a 0/0 character device NAME (or, beside a directory NAME of the same
    /// layer, which it marks as made anew, `trusted.overlay.opaque=y` on that directory);
    /// `.wh..wh..opq` becomes `trusted.overlay.opaque=y` on its directory. Each directory's
    /// times are put back afterwards, so directory mtimes can be compared. Names in `keep` are
    /// left alone (to prove the comparison notices). `below` are the directories of the layers
    /// under this one that it merges unless it is opaque itself (originals, top first).
    ///
    /// In a directory that merges nothing below (opaque, or with no directory below it that it
    /// merges) a whiteout hides nothing, so it is dropped instead of converted: the kernel
    /// lists the whiteout devices of such a directory in readdir although lstat of them fails
    /// with ENOENT (seen on 6.18), an artifact proxybundle need not copy. proxybundle is still
    /// given them.
    static func convert(_ copy: String, original: String, below: [String], keep: Set<String>) throws {
        guard let st = Disk.lstat(copy) else { throw TestFailure("lstat \(copy): errno \(errno)") }
        let names = try Disk.list(original)
        let mergedBelow = isOpaque(original, names: names, keep: keep) ? [] : below
        for name in names {
            let path = copy + "/" + name
            guard let child = Disk.lstat(original + "/" + name) else { throw TestFailure("lstat \(path): errno \(errno)") }
            if name.hasPrefix(".wh..wh.") && (child.st_mode & S_IFMT) == S_IFDIR {
                // the daemon's own (its copy-up work directory), never shown
                try FileManager.default.removeItem(atPath: path)
                continue
            }
            if (child.st_mode & S_IFMT) == S_IFDIR {
                let anew = names.contains(".wh." + name) && !keep.contains(".wh." + name)
                if anew {
                    guard setxattr(path, "trusted.overlay.opaque", "y", 1, 0) == 0 else {
                        throw TestFailure("setxattr \(path): errno \(errno)")
                    }
                }
                let childBelow = anew ? [] : merged(name, under: mergedBelow, keep: keep)
                try convert(path, original: original + "/" + name, below: childBelow, keep: keep)
                continue
            }
            if mergedBelow.isEmpty && (child.st_mode & S_IFMT) == S_IFCHR && child.st_rdev == 0 {
                guard unlink(path) == 0 else { throw TestFailure("unlink \(path): errno \(errno)") }
                continue
            }
            guard name.hasPrefix(".wh."), !keep.contains(name) else { continue }
            guard unlink(path) == 0 else { throw TestFailure("unlink \(path): errno \(errno)") }
            if name == ".wh..wh..opq" {
                guard setxattr(copy, "trusted.overlay.opaque", "y", 1, 0) == 0 else {
                    throw TestFailure("setxattr \(copy): errno \(errno)")
                }
            } else if !mergedBelow.isEmpty, Disk.lstat(original + "/" + String(name.dropFirst(4))) == nil {
                let hidden = copy + "/" + String(name.dropFirst(4))
                guard mknod(hidden, S_IFCHR, 0) == 0 else { throw TestFailure("mknod \(hidden): errno \(errno)") }
            }
        }
        var times = [st.st_atim, st.st_mtim]
        guard utimensat(AT_FDCWD, copy, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw TestFailure("utimensat \(copy): errno \(errno)")
        }
    }

    /// The directories `name` of `parents` (lower directories a directory merges, top first)
    /// that the directory `name` merges: each that is a directory, until a layer has a whiteout
    /// for it, another kind of entry, or an opaque directory (merged, and the last). A layer
    /// without the name is passed over.
    private static func merged(_ name: String, under parents: [String], keep: Set<String>) -> [String] {
        var result: [String] = []
        for parent in parents {
            let whitedOut = !keep.contains(".wh." + name) && Disk.lstat(parent + "/.wh." + name) != nil
            guard let st = Disk.lstat(parent + "/" + name) else {
                if whitedOut { break }
                continue
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else { break }
            let path = parent + "/" + name
            result.append(path)
            if whitedOut || isOpaque(path, names: (try? Disk.list(path)) ?? [], keep: keep) { break }
        }
        return result
    }

    private static func isOpaque(_ directory: String, names: [String], keep: Set<String>) -> Bool {
        var flag: UInt8 = 0
        return (names.contains(".wh..wh..opq") && !keep.contains(".wh..wh..opq"))
            || (lgetxattr(directory, "trusted.overlay.opaque", &flag, 1) == 1 && flag == UInt8(ascii: "y"))
    }
}

// MARK: - walking and comparing

enum OverlayTree {
    struct Entry: Equatable {
        var type: String
        var mode: mode_t
        var uid: uid_t
        var gid: gid_t
        var size: Int  // -1 for directories
        var mtime: String
        var nlink: Int  // -1 for directories
        var target: String?
        var content: String?
        var xattrs: [String]
        var listedType: String = "-"  // d_type in the parent's readdir
        var followed: String = "-"  // what stat(2) finds through a symlink
        var inode: String  // "dev:ino", only to group hard links
    }

    /// Walks the mount at `proxy` and the kernel overlay at `kernel` and fails once, with every
    /// difference, if they are not the same; returns the mount's tree. Modification times from
    /// `since` on are shown as `(recent)` on both (two calls on two file systems never happen in
    /// the same nanosecond).
    @discardableResult
    static func assertSame(_ proxy: String, _ kernel: String, since: Int? = nil, label: String = "",
                           file: StaticString = #filePath, line: UInt = #line) throws -> [String: Entry] {
        let ours = try walk(proxy, recentFrom: since)
        let theirs = try walk(kernel, recentFrom: since)
        XCTAssertGreaterThan(theirs.count, 1, "\(label)the kernel overlay shows nothing", file: file, line: line)
        let found = differences(ours, theirs, leftName: "proxybundle", rightName: "overlayfs")
        let shown = found.prefix(300)
        XCTAssertTrue(found.isEmpty,
                      "\(label)\(found.count) difference(s) between proxybundle and kernel overlayfs "
                          + "(\(ours.count) vs \(theirs.count) paths):\n" + shown.joined(separator: "\n")
                          + (found.count > shown.count ? "\n..." : ""),
                      file: file, line: line)
        return ours
    }

    /// `walk`, with modification times from `since` on (if given) shown as `(recent)`.
    static func walk(_ root: String, recentFrom since: Int?) throws -> [String: Entry] {
        let entries = try walk(root)
        guard let since else { return entries }
        return entries.mapValues { entry in
            var entry = entry
            if let seconds = Int(entry.mtime.prefix { $0 != "." }), seconds >= since { entry.mtime = "(recent)" }
            return entry
        }
    }

    /// Every path below `root` ("" for the root itself), through readdir and lstat.
    /// Names listed twice in one directory are recorded as `duplicate` entries.
    static func walk(_ root: String) throws -> [String: Entry] {
        var entries: [String: Entry] = [:]
        var listedTypes: [String: UInt8] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let path = relative.isEmpty ? root : root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0 else {
                entries[relative] = Entry(type: "lstat failed: errno \(errno)", mode: 0, uid: 0, gid: 0, size: 0,
                                          mtime: "", nlink: 0, target: nil, content: nil, xattrs: [], inode: "")
                continue
            }
            let kind = st.st_mode & S_IFMT
            var entry = Entry(type: typeName(kind), mode: st.st_mode & 0o7777, uid: st.st_uid, gid: st.st_gid,
                              size: kind == S_IFDIR ? -1 : Int(st.st_size),
                              mtime: "\(st.st_mtim.tv_sec).\(String(format: "%09d", st.st_mtim.tv_nsec))",
                              nlink: kind == S_IFDIR ? -1 : Int(st.st_nlink), target: nil, content: nil,
                              xattrs: xattrs(path), inode: "\(st.st_dev):\(st.st_ino)")
            switch kind {
            case S_IFLNK:
                entry.target = Disk.readLink(path) ?? "(readlink failed)"
                var followed = stat()
                entry.followed = stat(path, &followed) == 0
                    ? typeName(followed.st_mode & S_IFMT) + " 0" + String(followed.st_mode & 0o7777, radix: 8) + " \(followed.st_size)"
                    : "errno \(errno)"
            case S_IFREG:
                do { entry.content = String(try ContentHash.of(path), radix: 16) } catch { entry.content = "\(error)" }
            case S_IFCHR, S_IFBLK:
                entry.content = "rdev \(st.st_rdev)"
            case S_IFDIR:
                var seen = Set<String>()
                for (name, type) in try list(path) {
                    let child = relative.isEmpty ? name : relative + "/" + name
                    if !seen.insert(name).inserted {
                        entries["duplicate " + child] = entry
                        continue
                    }
                    listedTypes[child] = type
                    pending.append(child)
                }
            default:
                break
            }
            if let type = listedTypes[relative] { entry.listedType = direntTypeName(type) }
            entries[relative] = entry
        }
        return entries
    }

    /// Names and d_type through readdir(3), "." and ".." excluded.
    static func list(_ path: String) throws -> [(String, UInt8)] {
        guard let dir = opendir(path) else { throw TestFailure("opendir \(path): errno \(errno)") }
        defer { closedir(dir) }
        var names: [(String, UInt8)] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." {
                names.append((name, entry.pointee.d_type))
            }
        }
        return names
    }

    static func direntTypeName(_ type: UInt8) -> String {
        switch Int(type) {
        case Int(DT_REG): return "file"
        case Int(DT_DIR): return "directory"
        case Int(DT_LNK): return "symlink"
        case Int(DT_CHR): return "char device"
        case Int(DT_BLK): return "block device"
        case Int(DT_FIFO): return "fifo"
        case Int(DT_SOCK): return "socket"
        case Int(DT_UNKNOWN): return "unknown"
        default: return "d_type \(type)"
        }
    }

    static func typeName(_ kind: mode_t) -> String {
        switch kind {
        case S_IFREG: return "file"
        case S_IFDIR: return "directory"
        case S_IFLNK: return "symlink"
        case S_IFCHR: return "char device"
        case S_IFBLK: return "block device"
        case S_IFIFO: return "fifo"
        case S_IFSOCK: return "socket"
        default: return "type \(kind)"
        }
    }

    /// Names and values of the extended attributes, sorted.
    static func xattrs(_ path: String) -> [String] {
        var buffer = [CChar](repeating: 0, count: 65536)
        let length = llistxattr(path, &buffer, buffer.count)
        guard length >= 0 else { return ["llistxattr: errno \(errno)"] }
        let names = buffer[..<length].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return names.map { name in
            var value = [UInt8](repeating: 0, count: 65536)
            let size = lgetxattr(path, name, &value, value.count)
            return size < 0 ? "\(name) (errno \(errno))" : "\(name)=\(String(decoding: value[..<size], as: UTF8.self))"
        }.sorted()
    }

    /// Readable lines, one per difference; empty when the trees agree.
    static func differences(_ left: [String: Entry], _ right: [String: Entry],
                            leftName: String, rightName: String) -> [String] {
        var lines: [String] = []
        for path in Set(left.keys).union(right.keys).sorted() {
            let shown = path.isEmpty ? "(root)" : path
            guard let l = left[path] else {
                lines.append("only in \(rightName): \(shown) (\(right[path]!.type))")
                continue
            }
            guard let r = right[path] else {
                lines.append("only in \(leftName): \(shown) (\(l.type))")
                continue
            }
            func compare<T: Equatable>(_ what: String, _ a: T, _ b: T, _ describe: (T) -> String = { "\($0)" }) {
                if a != b { lines.append("\(shown): \(what) \(leftName)=\(describe(a)) \(rightName)=\(describe(b))") }
            }
            compare("type", l.type, r.type)
            compare("mode", l.mode, r.mode) { "0" + String($0, radix: 8) }
            compare("owner", "\(l.uid):\(l.gid)", "\(r.uid):\(r.gid)")
            compare("size", l.size, r.size)
            compare("mtime", l.mtime, r.mtime)
            compare("nlink", l.nlink, r.nlink)
            compare("symlink target", l.target, r.target) { $0 ?? "-" }
            compare("content", l.content, r.content) { $0 ?? "-" }
            compare("xattrs", l.xattrs, r.xattrs) { "[" + $0.joined(separator: ", ") + "]" }
            compare("d_type", l.listedType, r.listedType)
            compare("stat through the symlink", l.followed, r.followed)
        }
        let leftLinks = hardLinkGroups(left), rightLinks = hardLinkGroups(right)
        for group in leftLinks.subtracting(rightLinks).sorted() { lines.append("hard links only in \(leftName): \(group)") }
        for group in rightLinks.subtracting(leftLinks).sorted() { lines.append("hard links only in \(rightName): \(group)") }
        return lines
    }

    /// Paths of non-directories that share an inode, as "a = b = c".
    static func hardLinkGroups(_ entries: [String: Entry]) -> Set<String> {
        var groups: [String: [String]] = [:]
        for (path, entry) in entries where entry.type != "directory" && !entry.inode.isEmpty && !path.hasPrefix("duplicate ") {
            groups[entry.inode, default: []].append(path)
        }
        return Set(groups.values.filter { $0.count > 1 }.map { $0.sorted().joined(separator: " = ") })
    }
}
