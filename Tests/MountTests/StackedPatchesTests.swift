import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// Stacks of layers (substitution, patches, main bundle) against kernel overlayfs mounted with
/// the same layers (`lowerdir=SUBSTITUTION:P1:P2:MAIN`, each converted to overlayfs' forms as
/// OverlayDifferentialTests does): the visible trees must agree on every path and attribute.
/// Every read-only layer must be byte for byte unchanged after each test.
final class StackedPatchesTests: XCTestCase {
    var fx: MountFixture!
    /// The patches, highest priority first, under the fixture's root.
    var patches: [String] = []
    /// Directories outside the fixture's root, removed after the checks of tearDown.
    private var elsewhere: [String] = []

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        patches = [fx.root + "/p1", fx.root + "/p2"]
        for patch in patches { try Disk.mkdir(patch) }
    }

    override func tearDown() {
        fx?.tearDown()
        for path in elsewhere { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Mounts the fixture with `patches` (and `extra` arguments), which tearDown checks are
    /// unchanged.
    func start(_ patches: [String]? = nil, _ extra: [String] = []) throws {
        try fx.start(extra, patches: patches ?? self.patches)
    }

    /// The kernel's read-only overlay of the substitution, `patches` and the main bundle.
    func kernel(_ patches: [String]? = nil, at name: String = "kernel") throws -> String {
        let mountpoint = fx.root + "/" + name
        try KernelOverlay.mountStack([fx.substitution] + (patches ?? self.patches) + [fx.main], at: mountpoint,
                                     scratch: fx.root + "/" + name + "-converted")
        return mountpoint
    }

    func assertSameTree(_ proxy: String, _ kernel: String, since: Int? = nil,
                        file: StaticString = #filePath, line: UInt = #line) throws {
        try OverlayTree.assertSame(proxy, kernel, since: since, file: file, line: line)
    }

    // MARK: the rules, by hand

    /// Every rule of the issue by hand: shadowing across three and four layers, whiteouts in a
    /// middle layer (which hide what is below them and nothing above), an opaque directory in
    /// a middle layer with entries above it, a type change at each level, a directory present
    /// in four layers and one missing from a middle layer, a directory made anew beside its
    /// whiteout, hard links within a layer.
    static func buildHandwritten(s: String, p1: String, p2: String, m: String) throws {
        func at(_ root: String, _ path: String) -> String { root + "/" + path }
        // shadowing
        try Disk.write(at(m, "three.txt"), "main")
        try Disk.write(at(p2, "three.txt"), "patch 2, longer")
        try Disk.write(at(p1, "three.txt"), "patch 1", mode: 0o600)
        for (root, text) in [(m, "main"), (p2, "p2"), (p1, "p1"), (s, "the substitution's")] {
            try Disk.write(at(root, "four.txt"), text)
        }
        try Disk.write(at(m, "low.txt"), "main")
        try Disk.write(at(p2, "low.txt"), "patch 2")
        try Disk.write(at(p1, "only-p1.txt"), "p1")
        try OverlayScenario.setTime(at(p1, "only-p1.txt"), OverlayScenario.baseTime + 5, 5)
        // whiteouts in a middle layer hide below, not above
        try Disk.write(at(m, "gone.txt"), "main")
        try Disk.whiteout(p2, "gone.txt")
        try Disk.write(at(m, "revived.txt"), "main")
        try Disk.whiteout(p1, "revived.txt")
        try Disk.write(at(s, "revived.txt"), "substitution")
        try Disk.write(at(p2, "p2-only.txt"), "p2")
        try Disk.whiteout(p1, "p2-only.txt")
        try Disk.write(at(m, "back.txt"), "main")
        try Disk.whiteout(p2, "back.txt")
        try Disk.write(at(p1, "back.txt"), "patch 1 over a whiteout below")
        try Disk.write(at(m, "dev-hidden.txt"), "main")
        guard mknod(at(p1, "dev-hidden.txt"), S_IFCHR, 0) == 0 else { throw TestFailure("mknod: errno \(errno)") }
        try Disk.write(at(m, "gone-dir/x"), "main")
        try Disk.write(at(p2, "gone-dir/y"), "p2")
        try Disk.whiteout(p1, "gone-dir")
        // an opaque directory in a middle layer, entries above it
        try Disk.write(at(m, "op/m1"), "main")
        try Disk.write(at(m, "op/shared"), "main")
        try Disk.write(at(p2, "op/p2"), "p2")
        try Disk.opaque(at(p2, "op"))
        try Disk.write(at(p1, "op/p1"), "p1")
        try Disk.write(at(s, "op/s"), "s")
        try Disk.write(at(m, "op-deep/a/b/m"), "main")
        try Disk.write(at(p2, "op-deep/a/b/p2"), "p2")
        try Disk.opaque(at(p2, "op-deep/a"))
        try Disk.write(at(p1, "op-deep/a/b/p1"), "p1")
        // type changes at each level
        try Disk.write(at(m, "t1/a"), "main")
        try Disk.write(at(p2, "t1"), "p2 made it a file")
        try Disk.write(at(p1, "t1/b"), "p1 made it a directory again")
        try Disk.write(at(m, "t2"), "main file")
        try Disk.write(at(p2, "t2/x"), "p2 directory")
        try Disk.write(at(s, "t2"), "the substitution's file")
        try Disk.write(at(m, "t3/m"), "main")
        try Disk.symlink(at(p2, "t3"), to: "three.txt")
        try Disk.write(at(m, "t4"), "main file")
        try Disk.write(at(p1, "t4/p"), "p1 directory over main's file")
        try Disk.write(at(m, "t5/deep/m"), "main")
        try Disk.write(at(p2, "t5/deep"), "p2 file")
        try Disk.write(at(s, "t5/deep/s"), "s")
        // a directory in four layers, and one missing from the middle layers
        for (root, name) in [(m, "m"), (p2, "p2"), (p1, "p1"), (s, "s")] {
            try Disk.write(at(root, "all/" + name), name)
            try Disk.write(at(root, "all/shared"), "from " + name)
            try Disk.write(at(root, "all/sub/" + name), name)
        }
        try OverlayScenario.setMode(at(p1, "all"), 0o750)
        try OverlayScenario.setMode(at(s, "all"), 0o711)
        try Disk.write(at(m, "gap/a/b/m.txt"), "main")
        try Disk.write(at(s, "gap/a/b/s.txt"), "s")
        try Disk.write(at(p1, "gap2/x/p1.txt"), "p1")
        try Disk.write(at(m, "gap2/x/m.txt"), "main")
        // a directory made anew beside its whiteout, in a middle layer
        try Disk.write(at(m, "anew/old"), "main")
        try Disk.write(at(p2, "anew/older"), "p2")
        try Disk.write(at(p1, "anew/new"), "p1")
        try Disk.whiteout(p1, "anew")
        // hard links within a layer
        try Disk.write(at(p2, "links/a"), "linked in p2")
        try OverlayScenario.link(at(p2, "links/a"), at(p2, "links/b"))
        try Disk.write(at(m, "links/c"), "linked in main")
        try OverlayScenario.link(at(m, "links/c"), at(m, "links/d"))
        // attributes from the serving layer
        try Disk.write(at(m, "xattr.txt"), "main")
        try Disk.write(at(p2, "xattr.txt"), "p2")
        guard setxattr(at(p2, "xattr.txt"), "user.layer", "p2", 2, 0) == 0 else { throw TestFailure("setxattr: errno \(errno)") }
        // a root whiteout hides only its own name
        try Disk.write(at(m, "sub/root-whiteout"), "main, in a subdirectory")
        try Disk.write(at(m, "root-whiteout"), "main")
        try Disk.whiteout(p2, "root-whiteout")
        for dir in ["all", "gap", "op", "t1", "anew"] {
            for root in [m, p2, p1, s] where Disk.lstat(at(root, dir)) != nil {
                try OverlayScenario.setTime(at(root, dir), OverlayScenario.baseTime + 50, 50)
            }
        }
    }

    func testHandwrittenStackMatchesKernelOverlayfs() throws {
        try Self.buildHandwritten(s: fx.substitution, p1: patches[0], p2: patches[1], m: fx.main)
        let kernel = try kernel()
        defer { Unmounter.force(kernel) }
        try start()
        try assertSameTree(fx.mountpoint, kernel)
        // the rules, spelled out (the comparison above could not tell which side is wrong)
        XCTAssertEqual(try Disk.read(fx.inMount("three.txt")), "patch 1")
        XCTAssertEqual(try Disk.read(fx.inMount("four.txt")), "the substitution's")
        XCTAssertEqual(try Disk.read(fx.inMount("low.txt")), "patch 2")
        XCTAssertEqual(try Disk.read(fx.inMount("revived.txt")), "substitution")
        XCTAssertEqual(try Disk.read(fx.inMount("back.txt")), "patch 1 over a whiteout below")
        for hidden in ["gone.txt", "p2-only.txt", "dev-hidden.txt", "gone-dir", "root-whiteout"] {
            XCTAssertEqual(Disk.lstatError(fx.inMount(hidden)), ENOENT, hidden)
        }
        XCTAssertEqual(try Disk.read(fx.inMount("sub/root-whiteout")), "main, in a subdirectory")
        XCTAssertEqual(Set(try Disk.list(fx.inMount("op"))), ["s", "p1", "p2"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("op-deep/a/b"))), ["p1", "p2"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("t1"))), ["b"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("t4"))), ["p"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("t5/deep"))), ["s"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("all"))), ["m", "p2", "p1", "s", "shared", "sub"])
        XCTAssertEqual(try Disk.read(fx.inMount("all/shared")), "from s")
        XCTAssertEqual(Disk.lstat(fx.inMount("all")).map { $0.st_mode & 0o7777 }, 0o711)
        XCTAssertEqual(Set(try Disk.list(fx.inMount("gap/a/b"))), ["m.txt", "s.txt"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("anew"))), ["new"])
        XCTAssertEqual(Disk.lstat(fx.inMount("links/a"))?.st_ino, Disk.lstat(fx.inMount("links/b"))?.st_ino)
        XCTAssertEqual(Disk.lstat(fx.inMount("links/c"))?.st_ino, Disk.lstat(fx.inMount("links/d"))?.st_ino)
        XCTAssertNotEqual(Disk.lstat(fx.inMount("links/a"))?.st_ino, Disk.lstat(fx.inMount("links/c"))?.st_ino)
    }

    /// Random stacks: a generated main bundle under three generated layers over it.
    func testGeneratedStacksMatchKernelOverlayfs() throws {
        for seed: UInt64 in [0x57ac_0001, 0x57ac_0002] {
            var generator = OverlayScenario.Generator(seed: seed)
            let tag = String(seed, radix: 16)
            let tree = try generator.buildMain(fx.main + "/" + tag)
            for layer in patches.reversed() + [fx.substitution] {
                try generator.buildLayer(layer + "/" + tag, over: tree)
            }
        }
        let kernel = try kernel()
        defer { Unmounter.force(kernel) }
        try start()
        try assertSameTree(fx.mountpoint, kernel)
    }

    /// 400 layers, near overlayfs' own limit of 500 lower layers: the substitution, 398 patches
    /// (three generated with every kind of entry, the rest each shadowing, adding, whiting out
    /// and now and then making a directory opaque) and the main bundle, compared with kernel
    /// overlayfs entry by entry, before and after changes through the mount.
    func testFourHundredLayersMatchKernelOverlayfs() throws {
        var generator = OverlayScenario.Generator(seed: 0x400_0001)
        let tree = try generator.buildMain(fx.main + "/g")
        let many = (0..<398).map { fx.root + "/many/\($0)" }
        for (index, layer) in many.enumerated().reversed() {
            try Disk.mkdir(layer)
            if index < 3 {
                try generator.buildLayer(layer + "/g", over: tree)
                continue
            }
            try Disk.write(layer + "/own-\(index)", "\(index)")
            try Disk.write(layer + "/shared/\(index % 7)", "\(index)")
            if index % 11 == 0 { try Disk.whiteout(layer, "own-\(index + 1)") }
            if index % 50 == 0 {
                try Disk.mkdir(layer + "/shared")
                try Disk.opaque(layer + "/shared")
            }
        }
        try Disk.write(fx.substitution + "/own-5", "the substitution's")
        let kernel = try kernelOfMany(many, at: "kernel")
        defer { Unmounter.force(kernel) }
        try start(many)
        // names looked up before any listing: each found, or not, in the layers that hold it
        let names = (0..<400).map { "own-\($0)" } + (0..<8).map { "shared/\($0)" } + ["g", "missing"]
        func found(_ root: String) -> [String] { names.filter { Disk.lstat(root + "/" + $0) != nil } }
        XCTAssertEqual(found(fx.mountpoint), found(kernel))
        XCTAssertEqual(found(kernel).count, 395 - 36 + 7 + 1, "own-3 to own-397 but the 36 whited out, shared/0-6, g")
        try assertSameTree(fx.mountpoint, kernel)
        Unmounter.force(kernel)

        let since = Int(Date().timeIntervalSince1970) - 2
        XCTAssertEqual(unlink(fx.inMount("own-200")), 0)
        try Disk.write(fx.inMount("shared/3"), "rewritten")
        XCTAssertEqual(rename(fx.inMount("shared"), fx.inMount("shared-renamed")), 0, "merged from 50 layers, moved whole")
        XCTAssertEqual(mkdir(fx.inMount("made"), 0o755), 0)
        _ = fx.stop()
        let after = try kernelOfMany(many, at: "kernel-after")
        defer { Unmounter.force(after) }
        try start(many)
        try assertSameTree(fx.mountpoint, after, since: since)
    }

    /// 400 layers as mods make them (`ThinStack`, the shape of the bench's `thin.pl`): 398
    /// patches of 1-5 entries anywhere in a nested main bundle, whiteouts, opaque directories
    /// and type changes among them, looked up name by name before any listing (existing and
    /// missing names, at every depth), then walked, then changed through the mount: the same
    /// as kernel overlayfs each time.
    func testThinFourHundredLayersMatchKernelOverlayfs() throws {
        var generator = OverlayScenario.Generator(seed: 0x49_0400)
        let tree = try ThinStack.buildMain(fx.main, generator: &generator)
        let many = (0..<398).map { fx.root + "/thin/\($0)" }
        for (index, layer) in many.enumerated() { try ThinStack.buildPatch(layer, number: index, over: tree, generator: &generator) }
        let kernel = try kernelOfMany(many, at: "kernel")
        defer { Unmounter.force(kernel) }
        try start(many)
        var names = tree.files + tree.directories.map { $0 + "/missing.dat" } + tree.directories.map { $0 + "/nope/x" }
        for index in stride(from: 0, to: 398, by: 7) { names += ["d\(index % 6)/n\(index)-0.dat", "d\(index % 6)/nd\(index)-0/a.dat"] }
        for _ in 0..<names.count {
            let a = generator.below(names.count), b = generator.below(names.count)
            names.swapAt(a, b)
        }
        func found(_ root: String) -> [String] { names.filter { Disk.lstat(root + "/" + $0) != nil } }
        XCTAssertEqual(found(fx.mountpoint), found(kernel))
        try assertSameTree(fx.mountpoint, kernel)
        Unmounter.force(kernel)

        let since = Int(Date().timeIntervalSince1970) - 2
        let shown = tree.files.filter { Disk.lstat(fx.inMount($0)).map { $0.st_mode & S_IFMT == S_IFREG } ?? false }
        XCTAssertGreaterThan(shown.count, 100)
        for path in shown.prefix(20) { try Disk.write(fx.inMount(path), "rewritten") }
        for path in shown.dropFirst(20).prefix(20) { XCTAssertEqual(unlink(fx.inMount(path)), 0, path) }
        XCTAssertEqual(rename(fx.inMount("d1"), fx.inMount("d1-renamed")), 0, "merged from many patches, moved whole")
        XCTAssertEqual(mkdir(fx.inMount("d2/made"), 0o755), 0)
        _ = fx.stop()
        let after = try kernelOfMany(many, at: "kernel-after")
        defer { Unmounter.force(after) }
        try start(many)
        XCTAssertEqual(found(fx.mountpoint), found(after))
        try assertSameTree(fx.mountpoint, after, since: since)
    }

    /// Swaps between orders of the same thin patches (`ThinStack`, many of them over few
    /// names, so that several patches hold most names) while everything is cached, in the
    /// daemon and in the kernel: such a swap keeps what resolves as before and must forget the
    /// rest (`PatchSwap`), so each order matches kernel overlayfs of that order, looked up name
    /// by name before any listing, then walked. A copy-up after the swaps copies what the last
    /// order shows.
    func testThinStackSwapsBetweenOrdersMatchKernelOverlayfs() throws {
        var generator = OverlayScenario.Generator(seed: 0x49_5a0)
        let tree = try ThinStack.buildMain(fx.main, directories: 16, files: 60, generator: &generator)
        let many = (0..<120).map { fx.root + "/thin/\($0)" }
        for (index, layer) in many.enumerated() { try ThinStack.buildPatch(layer, number: index, over: tree, generator: &generator) }
        var shuffled = many
        for index in shuffled.indices.reversed() { shuffled.swapAt(index, generator.below(index + 1)) }
        // neighbours exchanged: most names keep their order, a few change it
        var pairs = many
        for index in stride(from: 0, to: pairs.count - 1, by: 2) { pairs.swapAt(index, index + 1) }
        try start(many)
        var names = tree.files + tree.directories.map { $0 + "/missing.dat" }
        for index in 0..<many.count { names += ["d\(index % 6)/n\(index)-0.dat", "d\(index % 6)/nd\(index)-0/a.dat"] }
        for name in tree.files { names += [name + "/in0.dat"] }
        func found(_ root: String) -> [String] {
            names.map { name in Disk.lstat(root + "/" + name).map { "\(name) \($0.st_mode & S_IFMT) \($0.st_size)" } ?? "\(name) -" }
        }
        _ = found(fx.mountpoint)
        _ = try OverlayTree.walk(fx.mountpoint)  // everything cached, in the daemon and the kernel
        for (round, order) in [Array(many.reversed()), pairs, shuffled, many, Array(many.reversed())].enumerated() {
            try Disk.write(fx.inMount(".layers"), order.map { $0 + "\n" }.joined())
            XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "yes", "round \(round): a reorder keeps what stays")
            let kernel = try kernelOfMany(order, at: "kernel-\(round)")
            defer { Unmounter.force(kernel) }
            XCTAssertEqual(found(fx.mountpoint), found(kernel), "round \(round)")
            try assertSameTree(fx.mountpoint, kernel)
        }
        let shown = tree.files.filter { Disk.lstat(fx.inMount($0)).map { $0.st_mode & S_IFMT == S_IFREG } ?? false }
        let path = try XCTUnwrap(shown.first)
        let before = try Disk.read(fx.inMount(path))
        let fd = open(fx.inMount(path), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, path)
        XCTAssertEqual(write(fd, "+", 1), 1)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inSubstitution(path)), before + "+")
    }

    /// The kernel's read-only overlay of the substitution, `many` and the main bundle: named
    /// relative to the directory of their copies (a symlink there for the main bundle), since 400
    /// absolute paths would not fit the page a mount's options may take.
    private func kernelOfMany(_ many: [String], at name: String) throws -> String {
        let scratch = fx.root + "/" + name + "-converted"
        let lowers = try KernelOverlay.convertedStack([fx.substitution] + many + [fx.main], scratch: scratch)
        try Disk.symlink(scratch + "/main", to: fx.main)
        let relative = lowers.dropLast().map { String($0.dropFirst(scratch.count + 1)) } + ["main"]
        let mountpoint = fx.root + "/" + name
        let previous = FileManager.default.currentDirectoryPath
        guard chdir(scratch) == 0 else { throw TestFailure("chdir \(scratch)") }
        defer { _ = chdir(previous) }
        try KernelOverlay.mountReadOnly(lowers: relative, at: mountpoint)
        return mountpoint
    }

    // MARK: changes through the mount

    /// The same changes on proxybundle and on a writable kernel overlay of the same patches and
    /// main bundle (an empty upper layer): the answers and the trees agree, and whiteouts are
    /// written only where a layer below still shows the name.
    func testChangesThroughAStackMatchKernelOverlayfs() throws {
        try Self.buildHandwritten(s: fx.root + "/unused", p1: patches[0], p2: patches[1], m: fx.main)
        let kernel = fx.root + "/kernel"
        let lowers = try KernelOverlay.convertedStack(patches + [fx.main], scratch: fx.root + "/converted")
        try KernelOverlay.mountWritable(lowers: lowers, at: kernel, upper: fx.root + "/kernel-upper",
                                        extra: ",redirect_dir=on,index=off,metacopy=off")
        defer { Unmounter.force(kernel) }
        for dir in [fx.root + "/kernel-upper", fx.substitution] {
            guard let root = Disk.lstat(fx.main) else { throw TestFailure("lstat main") }
            try OverlayScenario.setMode(dir, root.st_mode & 0o7777)
            try OverlayScenario.setTime(dir, root.st_mtim.tv_sec, root.st_mtim.tv_nsec)
        }
        try start()
        func exercise(_ root: String) -> [String] {
            func at(_ path: String) -> String { root + "/" + path }
            func result(_ value: Int32) -> String { value == 0 ? "ok" : "errno \(errno)" }
            var answers: [String] = []
            answers.append(result(unlink(at("three.txt"))))  // p1's: p2 and main still have it
            answers.append(result(unlink(at("only-p1.txt"))))
            answers.append(result(unlink(at("back.txt"))))  // only p1 shows it: p2 whites out main's
            answers.append(result(rmdir(at("t1"))))  // p1's directory holds b
            answers.append(result(unlink(at("t1/b"))))
            answers.append(result(rmdir(at("t1"))))  // p2's file below ended the merge
            answers.append(result(rename(at("low.txt"), at("low-renamed.txt"))))
            answers.append(result(rename(at("all"), at("all-renamed"))))  // merged from four layers
            answers.append(result(rename(at("op"), at("op-renamed"))))
            let fd = open(at("links/a"), O_WRONLY | O_APPEND)
            answers.append(fd >= 0 ? "open ok" : "open errno \(errno)")
            if fd >= 0 { answers.append(write(fd, "+", 1) == 1 ? "write ok" : "write errno \(errno)"); close(fd) }
            answers.append(result(chmod(at("xattr.txt"), 0o600)))  // a copy-up from p2, with its xattr
            answers.append(result(mkdir(at("gone-dir"), 0o755)))  // over p1's whiteout: starts empty
            answers.append(result(symlink("target", at("gone.txt"))))
            answers.append(result(rename(at("anew/new"), at("op-renamed/new"))))
            // made in the substitution over p1's whiteout of main's file, then removed
            answers.append(result(creat(at("revived.txt"), 0o644) >= 0 ? 0 : -1))
            answers.append(result(unlink(at("revived.txt"))))
            return answers
        }
        let since = Int(Date().timeIntervalSince1970) - 2
        let mine = exercise(fx.mountpoint)
        let theirs = exercise(kernel)
        XCTAssertEqual(mine, theirs)
        try assertSameTree(fx.mountpoint, kernel, since: since)
        XCTAssertEqual(try Self.whiteouts(fx.substitution), try Self.whiteouts(fx.root + "/kernel-upper"),
                       "whiteouts where a layer below shows the name, and only there")
        for name in ["three.txt", "back.txt", "only-p1.txt", "low.txt"] {
            XCTAssertNotNil(Disk.lstat(fx.inSubstitution(".wh." + name)), name)
        }
        XCTAssertNil(Disk.lstat(fx.inSubstitution(".wh.revived.txt")), "p1 whites out main's: nothing below shows it")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("links/a")), "linked in p2+", "the copy is in the substitution")
        XCTAssertEqual(Disk.lstat(fx.inMount("links/a"))?.st_nlink, 1, "a copy-up breaks the link (as on overlayfs)")
    }

    /// A file that only a middle layer has is copied up from that layer: content, mode,
    /// attributes; it keeps its inode number, and the layer is not touched (tearDown).
    func testCopyUpFromAMiddleLayerKeepsContentAttributesAndInode() throws {
        try Disk.write(fx.inMain("file.txt"), "main")
        try Disk.write(patches[1] + "/file.txt", "from p2", mode: 0o640)
        guard setxattr(patches[1] + "/file.txt", "user.from", "p2", 2, 0) == 0 else { throw TestFailure("setxattr") }
        try Disk.write(patches[1] + "/dir/deep.txt", "deep in p2")
        try start()
        let before = try XCTUnwrap(Disk.lstat(fx.inMount("dir/deep.txt")))
        let fd = open(fx.inMount("dir/deep.txt"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "!", 1), 1)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("dir/deep.txt")), "deep in p2!")
        XCTAssertEqual(Disk.lstat(fx.inMount("dir/deep.txt"))?.st_ino, before.st_ino, "the copy keeps its number")
        XCTAssertEqual(chmod(fx.inMount("file.txt"), 0o600), 0)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("file.txt")), "from p2")
        var value = [UInt8](repeating: 0, count: 8)
        XCTAssertEqual(getxattr(fx.inSubstitution("file.txt"), "user.from", &value, value.count), 2)
        XCTAssertEqual(Array(value.prefix(2)), Array("p2".utf8))
    }

    /// Inode numbers are unique across every layer, also with a patch on another file system,
    /// stable across invalidations, and shared by hard links within a layer.
    func testInodeNumbersAreUniqueAcrossLayersAndStable() throws {
        let shm = "/dev/shm/pb-stack-\(getpid())"
        try Disk.mkdir(shm)
        elsewhere.append(shm)
        patches = [patches[0], shm]
        for index in 0..<20 {
            try Disk.write(fx.inMain("f\(index)"), "main")
            try Disk.write(patches[0] + "/p1-\(index)", "p1")
            try Disk.write(shm + "/shm-\(index)", "shm")
            try Disk.write(fx.inSubstitution("s-\(index)"), "s")
        }
        try Disk.write(shm + "/a", "linked")
        try OverlayScenario.link(shm + "/a", shm + "/b")
        try start()
        func numbers() throws -> [String: ino_t] {
            var result: [String: ino_t] = [:]
            for name in try Disk.list(fx.mountpoint) { result[name] = Disk.lstat(fx.inMount(name))?.st_ino }
            return result
        }
        let first = try numbers()
        XCTAssertEqual(first.count, 82)
        XCTAssertEqual(first["a"], first["b"], "hard links within a layer share their number")
        var seen: [ino_t: String] = [:]
        for (name, number) in first where name != "b" {
            XCTAssertNil(seen[number], "\(name) and \(seen[number] ?? "") share \(number)")
            seen[number] = name
        }
        try Disk.write(fx.inMount(".invalidate"), "/\n")
        XCTAssertEqual(try numbers(), first, "stable across a full invalidation")
    }

    // MARK: real tools

    /// cp -a, tar and rsync copy the view of a four-layer mount out exactly as they copy the
    /// kernel's overlay of the same layers; sqlite3, sed -i and git change files of the patches
    /// through the mount, and the patches stay as they were (tearDown checks them).
    func testRealToolsThroughAFourLayerMount() throws {
        try Self.buildHandwritten(s: fx.substitution, p1: patches[0], p2: patches[1], m: fx.main)
        var generator = OverlayScenario.Generator(seed: 0x700_15)
        let tree = try generator.buildMain(fx.main + "/gen")
        for layer in patches.reversed() + [fx.substitution] { try generator.buildLayer(layer + "/gen", over: tree) }
        try Disk.mkdir(patches[1] + "/db")
        try run("sqlite3", [patches[1] + "/db/app.sqlite", "CREATE TABLE t(name); INSERT INTO t VALUES ('a'), ('b');"])
        try Disk.write(patches[0] + "/config.txt", "colour=red\nsize=2\n")
        let kernel = try kernel()
        defer { Unmounter.force(kernel) }
        try start()
        for (tool, copy) in [("cp", Self.copyWithCp), ("tar", Self.copyWithTar), ("rsync", Self.copyWithRsync)] {
            let ours = fx.root + "/\(tool)-proxybundle", theirs = fx.root + "/\(tool)-overlayfs"
            try copy(fx.mountpoint, ours)
            try copy(kernel, theirs)
            let differences = OverlayTree.differences(try OverlayTree.walk(ours), try OverlayTree.walk(theirs),
                                                      leftName: "proxybundle", rightName: "overlayfs")
            XCTAssertTrue(differences.isEmpty, "\(tool): " + differences.prefix(50).joined(separator: "\n"))
        }
        let db = fx.inMount("db/app.sqlite")
        try run("sqlite3", [db, "BEGIN; INSERT INTO t VALUES ('c'); COMMIT;"])
        XCTAssertEqual(try run("sqlite3", [db, "SELECT group_concat(name, ',') FROM t;"]), "a,b,c\n")
        XCTAssertEqual(try run("sqlite3", [db, "PRAGMA integrity_check;"]), "ok\n")
        XCTAssertEqual(try run("sqlite3", [fx.inSubstitution("db/app.sqlite"), "SELECT count(*) FROM t;"]), "3\n")
        try run("sed", ["-i", "s/red/blue/", fx.inMount("config.txt")])
        XCTAssertEqual(try Disk.read(fx.inMount("config.txt")), "colour=blue\nsize=2\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("config.txt")), "colour=blue\nsize=2\n")
        let env = ["HOME=\(fx.root)", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e",
                   "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e"]
        let project = fx.inMount("all")
        try run("git", ["-C", project, "init", "-q", "-b", "main"], environment: env)
        try run("git", ["-C", project, "add", "-A"], environment: env)
        try run("git", ["-C", project, "commit", "-q", "-m", "four layers"], environment: env)
        XCTAssertEqual(try run("git", ["-C", project, "status", "--porcelain"], environment: env), "")
        XCTAssertEqual(try run("git", ["-C", project, "ls-files"], environment: env).split(separator: "\n").count, 9)
    }

    @discardableResult
    private func run(_ name: String, _ arguments: [String], environment: [String] = []) throws -> String {
        let result = try Spawn.run("/usr/bin/" + name, arguments, environment: environment)
        guard result.status == 0 else { throw TestFailure("\(name) \(arguments) exited \(result.status): \(result.error)") }
        return result.output
    }

    private static func copyWithCp(_ from: String, _ to: String) throws {
        try Disk.mkdir(to)
        let result = try Spawn.run("/bin/cp", ["-a", from + "/.", to + "/"])
        guard result.status == 0 else { throw TestFailure("cp -a: \(result.error)") }
    }

    private static func copyWithTar(_ from: String, _ to: String) throws {
        try Disk.mkdir(to)
        let archive = to + ".tar"
        for arguments in [["-C", from, "--xattrs", "-cf", archive, "."], ["-C", to, "--xattrs", "-xpf", archive]] {
            let result = try Spawn.run("/bin/tar", arguments)
            guard result.status == 0 else { throw TestFailure("tar \(arguments): \(result.error)") }
        }
    }

    /// Twice: with -H, rsync may make a hard link in a directory after it set the directory's
    /// times (its processes race), leaving the copy's mtime "now" on either side; a second pass
    /// copies nothing and puts the times right. With `--modify-window=-1`: by default rsync
    /// takes times in the same second for equal, so a directory made in the second the
    /// layers were built kept its copy's "now" on either side (1 run in 4 failed so).
    private static func copyWithRsync(_ from: String, _ to: String) throws {
        for _ in 0..<2 {
            let result = try Spawn.run("/usr/bin/rsync", ["-aHAX", "--modify-window=-1", from + "/", to + "/"])
            guard result.status == 0 else { throw TestFailure("rsync: \(result.error)") }
        }
    }

    // MARK: .invalidate

    /// Changes made directly in any layer show after `.invalidate` (exactly: inotify watches
    /// every layer of the directories in use), the mount warm before: the view is then the
    /// kernel's of the changed layers.
    func testChangesInAnyLayerShowAfterInvalidate() throws {
        try Self.buildHandwritten(s: fx.substitution, p1: patches[0], p2: patches[1], m: fx.main)
        try start()
        defer { try? fx.acceptLayersAsTheyAre() }  // the test changes the layers itself
        _ = try OverlayTree.walk(fx.mountpoint)
        try Disk.write(patches[1] + "/low.txt", "patch 2, second version")  // in place
        try Disk.write(patches[1] + "/added-in-p2.txt", "new in p2")
        try Disk.whiteout(patches[1], "four.txt")  // hidden by nothing: the substitution's stays
        try Disk.whiteout(patches[0], "only-main-below")
        try Disk.write(fx.inMain("only-main-below"), "hidden by p1's whiteout")
        try FileManager.default.removeItem(atPath: patches[0] + "/.wh.revived.txt")
        try FileManager.default.removeItem(atPath: patches[1] + "/.wh..wh..opq".replacingOccurrences(of: "/.wh", with: "/op/.wh"))
        try Disk.write(patches[0] + "/op/p1-late", "late")
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "yes")
        try fx.acceptMainBundleAsItIs()
        let kernel = try kernel()
        defer { Unmounter.force(kernel) }
        try assertSameTree(fx.mountpoint, kernel)
        XCTAssertEqual(try Disk.read(fx.inMount("low.txt")), "patch 2, second version")
        XCTAssertEqual(Disk.lstatError(fx.inMount("only-main-below")), ENOENT)
        XCTAssertEqual(Set(try Disk.list(fx.inMount("op"))), ["s", "p1", "p2", "p1-late", "m1", "shared"])
    }

    // MARK: .layers

    /// `.layers` names every layer, top first; writing patch directories replaces the patches
    /// at once, while everything is cached: the view is the kernel's overlay of the new stack.
    func testLayersSwapWhileWarmMatchesKernelOverlayfs() throws {
        try Self.buildHandwritten(s: fx.substitution, p1: patches[0], p2: patches[1], m: fx.main)
        let third = fx.root + "/p3"
        try Disk.write(third + "/three.txt", "patch 3")
        try Disk.write(third + "/op/p3", "p3")
        try Disk.whiteout(third, "four.txt")
        try fx.guardUnchanged([third])
        try start([patches[1]])
        XCTAssertEqual(try Disk.read(fx.inMount(".layers")),
                       "substitution \(fx.substitution)\npatch \(patches[1])\nmain \(fx.main)\n")
        _ = try OverlayTree.walk(fx.mountpoint)  // everything cached, in the daemon and the kernel
        for stack in [[third, patches[0], patches[1]], [patches[0]], [], [patches[1], third]] {
            try Disk.write(fx.inMount(".layers"), stack.map { $0 + "\n" }.joined() + (stack.isEmpty ? "\n" : ""))
            let expected = "substitution \(fx.substitution)\n" + stack.map { "patch \($0)\n" }.joined() + "main \(fx.main)\n"
            XCTAssertEqual(try Disk.read(fx.inMount(".layers")), expected)
            let kernel = try kernel(stack, at: "kernel-\(stack.count)-\(stack.first.map { ($0 as NSString).lastPathComponent } ?? "none")")
            defer { Unmounter.force(kernel) }
            try assertSameTree(fx.mountpoint, kernel)
            _ = try OverlayTree.walk(fx.mountpoint)
        }
        // writes go on: a copy-up from the new patches lands in the substitution
        XCTAssertEqual(try Disk.read(fx.inMount("three.txt")), "patch 2, longer")
        try Disk.write(fx.inMount("three.txt"), "written")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("three.txt")), "written")
        XCTAssertEqual(try fx.stats()["patch"], third, "the last patch line names the lowest patch")
    }

    /// Readers and copy-ups go on while `.layers` swaps between one patch and two (another
    /// above it, which has nothing of theirs), so that layer numbers change meaning: every read
    /// sees the patch's file whole (or its copy once appended to), never an error; every
    /// copy-up copies it. Each swap is sent while a copy-up is held at a known point (a lease
    /// on its source, which the daemon's open of it waits for) and readers read the other
    /// files, so every swap overlaps a copy-up, whatever the machine's speed; the swap returns
    /// while the copy-up is still held (a swap waits for no request).
    func testRequestsInFlightWhileThePatchesAreSwapped() throws {
        let count = 20
        for index in 0..<count {
            try Disk.write(fx.inMain("x/f\(index)"), "main \(index)")
            try Disk.write(patches[0] + "/x/f\(index)", "p1 \(index)")
        }
        try Disk.write(patches[1] + "/elsewhere", "p2 has nothing in x")
        try start([patches[0]])
        try fx.guardUnchanged([patches[1]])
        let errors = Locked<[String]>([], rank: .local)
        // the file whose copy-up is held (readers leave it alone), and what each reader reads
        let reading = Locked<(held: Int?, current: [Int?])>((nil, [nil, nil]), rank: .local)
        let stop = Locked(false, rank: .local)
        let mountpoint = fx.mountpoint
        let group = DispatchGroup()
        for reader in 0..<2 {
            DispatchQueue.global().async(group: group) {
                var index = reader
                while !stop.withLock({ $0 }) {
                    index = (index + 7) % count
                    let chosen = index
                    guard reading.withLock({ (state) -> Bool in
                        guard state.held != chosen else { return false }
                        state.current[reader] = chosen
                        return true
                    }) else { continue }
                    defer { reading.withLock { $0.current[reader] = nil } }
                    guard let text = try? Disk.read(mountpoint + "/x/f\(index)") else {
                        errors.withLock { $0.append("read f\(index): errno \(errno)") }
                        continue
                    }
                    if text != "p1 \(index)" && text != "p1 \(index)+" {  // before or after its copy-up
                        errors.withLock { $0.append("read f\(index): \(text)") }
                    }
                }
            }
        }
        defer { stop.withLock { $0 = true } }
        for index in 0..<count {
            reading.withLock { $0.held = index }
            try eventually("readers leave f\(index)") { !reading.withLock { $0.current.contains(index) } }
            // the daemon closes a reader's descriptor on RELEASE, which comes after close()
            let lease = try eventually("a lease on f\(index)") { try? Lease(patches[0] + "/x/f\(index)") }
            defer { lease.release() }
            let appender = try Spawn.start("/bin/sh", ["-c", "printf + >> \"$0\"", fx.inMount("x/f\(index)")])
            try eventually("the copy-up of f\(index) waits for the lease") { lease.isWanted || KernelWait.hasEnded(appender) }
            XCTAssertTrue(lease.isWanted, "f\(index) was appended to without a read of the patch's file")
            let stack = index % 2 == 0 ? [patches[1], patches[0]] : [patches[0]]
            let swapper = try Spawn.start("/bin/sh", ["-c", "printf '%s\\n' \"$@\" > \"$0\"", fx.inMount(".layers")] + stack)
            // a swap waits for no request: it returns while the copy-up is still held
            try eventually("the swap to \(stack) returns while the copy-up of f\(index) is held") { KernelWait.hasEnded(swapper) }
            XCTAssertTrue(lease.isWanted, "the copy-up of f\(index) still waits")
            lease.release()
            XCTAssertEqual(Spawn.wait(appender, seconds: 20), 0, "append to f\(index)")
            XCTAssertEqual(Spawn.wait(swapper, seconds: 20), 0, "swap to \(stack)")
            reading.withLock { $0.held = nil }
        }
        stop.withLock { $0 = true }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success, "a reader hangs")
        XCTAssertEqual(errors.withLock { $0 }, [])
        for index in 0..<count {
            let copy = try Disk.read(fx.inSubstitution("x/f\(index)"))
            XCTAssertEqual(copy, "p1 \(index)+", "f\(index)")
        }
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
    }

    /// A list that cannot be applied fails the write with an errno and changes nothing.
    func testLayersRefusesWhatCannotBeApplied() throws {
        try Disk.write(patches[0] + "/p1.txt", "p1")
        try Disk.write(fx.root + "/a-file", "not a directory")
        try start([patches[0]])
        let before = try Disk.read(fx.inMount(".layers"))
        try Disk.mkdir(fx.inMain("inner"))
        try fx.acceptMainBundleAsItIs()
        let cases: [(String, Int32)] = [
            (fx.root + "/missing\n", ENOENT),
            (fx.root + "/a-file\n", ENOTDIR),
            ("relative/path\n", EINVAL),
            (patches[0] + "\n" + patches[0] + "\n", EINVAL),
            (fx.main + "\n", EINVAL),
            (fx.substitution + "\n", EINVAL),
            (fx.main + "/..\n", EINVAL),  // the fixture's root holds every layer
            (fx.mountpoint + "/sub\n", EINVAL),
            (patches[1] + "\n" + fx.main + "/inner\n", EINVAL),
            (patches[1] + "\n" + fx.root + "/missing\n", ENOENT),
        ]
        for (text, expected) in cases {
            let fd = open(fx.inMount(".layers"), O_WRONLY)
            XCTAssertGreaterThanOrEqual(fd, 0)
            let written = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            let code = errno
            close(fd)
            XCTAssertEqual(written, -1, text)
            XCTAssertEqual(code, expected, text)
            XCTAssertEqual(try Disk.read(fx.inMount(".layers")), before, "nothing changed: \(text)")
        }
        XCTAssertEqual(try Disk.read(fx.inMount("p1.txt")), "p1")
    }

    /// The names whited out in an upper directory tree, in either form (`.wh.NAME` files or
    /// 0/0 devices), by relative path; the work directory left out.
    static func whiteouts(_ root: String, _ relative: String = "") throws -> Set<String> {
        var result = Set<String>()
        let dir = relative.isEmpty ? root : root + "/" + relative
        for name in try Disk.list(dir) where name != ".wh..wh.work" {
            let path = relative.isEmpty ? name : relative + "/" + name
            guard let st = Disk.lstat(dir + "/" + name) else { continue }
            if (st.st_mode & S_IFMT) == S_IFDIR {
                result.formUnion(try whiteouts(root, path))
            } else if (st.st_mode & S_IFMT) == S_IFCHR && st.st_rdev == 0 {
                result.insert(path)
            } else if name.hasPrefix(".wh."), name != ".wh..wh..opq" {
                result.insert(relative.isEmpty ? String(name.dropFirst(4)) : relative + "/" + String(name.dropFirst(4)))
            }
        }
        return result
    }
}
