import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// `--no-substitution`: the main bundle under its patches with no writable layer. The view is
/// kernel overlayfs' of the same layers without an upper layer; every change answers EROFS;
/// nothing is written anywhere (no default substitution directory, no work area); a remount
/// to read-write is refused in one line.
final class NoSubstitutionTests: XCTestCase {
    var fx: MountFixture!
    var patches: [String] = []
    /// Where the default substitution directory would go (the daemon's XDG_CACHE_HOME).
    var cache = ""

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        fx.usesSubstitution = false
        cache = fx.root + "/cache"
        fx.environment = ["XDG_CACHE_HOME=\(cache)"]
        patches = [fx.root + "/p1", fx.root + "/p2"]
        for patch in patches { try Disk.mkdir(patch) }
        try StackedPatchesTests.buildHandwritten(s: fx.root + "/unused", p1: patches[0], p2: patches[1], m: fx.main)
    }

    override func tearDown() {
        fx?.tearDown()
    }

    private func start(_ extra: [String] = []) throws {
        try fx.start(["--no-substitution"] + patches.flatMap { ["--patch", $0] } + extra)
    }

    private func proxybundle(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run(MountFixture.binary, arguments, environment: ["XDG_CACHE_HOME=\(cache)"])
    }

    func testTheViewIsKernelOverlayfsWithoutAnUpperLayer() throws {
        let before = try patches.map(TreeChecksum.of)
        try start()
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack(patches + [fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)
        XCTAssertEqual(try Disk.read(fx.inMount(".layers")),
                       patches.map { "patch \($0)\n" }.joined() + "main \(fx.main)\n")
        fx.stop()
        XCTAssertEqual(try patches.map(TreeChecksum.of), before, "the patches are unchanged")
        XCTAssertFalse(FileManager.default.fileExists(atPath: cache), "no default substitution directory was made")
        XCTAssertFalse(FileManager.default.fileExists(atPath: fx.substitution + "/" + ".wh..wh.work"))
        XCTAssertEqual(try Disk.list(fx.substitution), [], "the fixture's substitution directory was not used")
    }

    /// Every kind of change answers EROFS, as on a kernel overlay without an upper layer.
    func testEveryChangeAnswersReadOnly() throws {
        try start()
        let file = try XCTUnwrap(try MergedView.walk(fx.mountpoint).filter { $0.value.kind == "file" }.keys.sorted().first)
        let path = fx.inMount(file)
        func erofs(_ what: String, _ result: Int32) {
            XCTAssertEqual(result, -1, what)
            XCTAssertEqual(errno, EROFS, what)
        }
        erofs("create", open(fx.inMount("new"), O_CREAT | O_WRONLY, 0o644))
        erofs("open for writing", open(path, O_WRONLY))
        erofs("mkdir", mkdir(fx.inMount("newdir"), 0o755))
        erofs("unlink", unlink(path))
        erofs("rename", rename(path, fx.inMount("renamed")))
        erofs("chmod", chmod(path, 0o600))
        erofs("symlink", symlink("x", fx.inMount("link")))
        erofs("setxattr", setxattr(path, "user.test", "v", 1, 0))
        XCTAssertEqual(try Disk.read(fx.inMount(".stats")).contains("read_only: yes"), true)
    }

    func testARemountToReadWriteIsRefusedInOneLine() throws {
        try start()
        let result = try proxybundle(["remount", fx.mountpoint, "-o", "rw"])
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.error.contains("no substitution directory"), result.error)
        XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
        XCTAssertEqual(open(fx.inMount("new"), O_CREAT | O_WRONLY, 0o644), -1)
        XCTAssertEqual(errno, EROFS, "still read-only")
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("substitution: none"), status.output)
    }

    func testASubstitutionBesideItIsRefused() throws {
        for extra in [["--substitution", fx.substitution], ["-o", "substitution=\(fx.substitution)"]] {
            let result = try proxybundle(["mount", fx.main, fx.mountpoint, "--no-substitution", "--foreground"] + extra)
            XCTAssertEqual(result.status, 1, "\(extra)")
            XCTAssertTrue(result.error.contains("--no-substitution and a substitution directory"), result.error)
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
        }
        XCTAssertFalse(fx.isMounted)
    }

    /// The patches swap as on any mount, and `-o nosubstitution` is the same as the flag.
    func testPatchesSwapWithoutASubstitution() throws {
        fx.usesSubstitution = false
        try fx.start(["-o", "nosubstitution", "--patch", patches[1]])
        try Disk.write(fx.inMount(".layers"), patches[0] + "\n")
        XCTAssertEqual(try Disk.read(fx.inMount(".layers")), "patch \(patches[0])\nmain \(fx.main)\n")
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([patches[0], fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)
    }
}
