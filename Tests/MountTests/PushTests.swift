import CSyscalls
import Foundation
import XCTest

/// `push` and `export`: a substitution edited through a mount, published to a real registry
/// over a base image, pulled and mounted elsewhere, shows what the workstation showed (kernel
/// overlayfs of the workstation's layers as the oracle); layers are deterministic.
final class PushTests: RegistryTestCase {
    func run(_ arguments: [String]) throws -> String {
        let run = try Spawn.run(MountFixture.binary, arguments)
        guard run.status == 0 else { throw TestFailure("proxybundle \(arguments): \(run.error)") }
        return run.output
    }

    func testAnEditedSubstitutionPushedOverABaseShowsTheSameTreeWherePulled() throws {
        let base = fx.root + "/src-base"
        try Disk.write(base + "/a.txt", "base a")
        try Disk.write(base + "/d/one", "one")
        try Disk.write(base + "/d/two", "two")
        try Disk.write(fx.main + "/main.txt", "main")
        try Disk.write(fx.main + "/old.txt", "to be deleted")
        try Disk.write(fx.main + "/d/m", "main's d")
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "base", [(try TestImage.tar(of: base), .gzip)])
        let baseReference = "\(registry.host)/app:base"
        let copied = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "oci:\(layout):base", "docker://" + baseReference])
        XCTAssertEqual(copied.status, 0, copied.error)

        // the workstation: the base as a patch, edits through the mount into the substitution
        try fx.start(["--patch", base])
        try Disk.write(fx.inMount("a.txt"), "edited a")
        XCTAssertEqual(unlink(fx.inMount("old.txt")), 0)
        for name in ["one", "two", "m"] { XCTAssertEqual(unlink(fx.inMount("d/" + name)), 0) }
        XCTAssertEqual(rmdir(fx.inMount("d")), 0)
        XCTAssertEqual(mkdir(fx.inMount("d"), 0o750), 0)  // made anew: opaque over base and main
        try Disk.write(fx.inMount("d/new"), "new in d")
        XCTAssertEqual(symlink("a.txt", fx.inMount("link")), 0)
        XCTAssertEqual(link(fx.inMount("a.txt"), fx.inMount("hard")), 0)
        XCTAssertEqual(setxattr(fx.inMount("a.txt"), "user.note", "kept", 4, 0), 0)
        try Disk.write(fx.inMount(String(repeating: "long-name-", count: 20)), "a name over 100 bytes")
        fx.stop()

        let reference = "\(registry.host)/app:hotfix"
        let digest = try run(["push", fx.substitution, reference, "--base", baseReference, "--tls-verify=false"])
        XCTAssertTrue(digest.hasPrefix("sha256:"), digest)
        let edited = fx.root + "/edited"
        XCTAssertEqual(rename(fx.substitution, edited), 0)
        try Disk.mkdir(fx.substitution)
        guard let root = Disk.lstat(edited) else { throw TestFailure("lstat") }
        try OverlayScenario.setMode(fx.substitution, root.st_mode & 0o7777)
        try OverlayScenario.setTime(fx.substitution, root.st_mtim.tv_sec, root.st_mtim.tv_nsec)

        // a machine of the fleet
        let patches = try run(["pull", reference, "--store", store, "--tls-verify=false"]).split(separator: "\n").map(String.init)
        XCTAssertEqual(patches.count, 2, "the base's layer and the hotfix")
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([edited, base, fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try fx.start(patches.flatMap { ["--patch", $0] })
        try OverlayTree.assertSame(fx.mountpoint, kernel)
        XCTAssertEqual(try Disk.list(fx.inMount("d")), ["new"])
        XCTAssertEqual(Disk.lstat(fx.inMount("hard"))?.st_ino, Disk.lstat(fx.inMount("a.txt"))?.st_ino)
    }

    func testExportIsDeterministicAndPutsWhiteoutsFirst() throws {
        let source = fx.root + "/source"
        try Disk.write(source + "/-first", "sorts before .wh.")
        try Disk.whiteout(source, "gone")
        try Disk.write(source + "/z/file", "z")
        try Disk.write(source + "/.wh..wh.work/left-out", "the daemon's work directory")
        let first = try run(["export", source, "--to", "oci:\(fx.root)/one:v1", "--reproducible"])
        XCTAssertEqual(utimensat(AT_FDCWD, source + "/z/file", [timespec(tv_sec: 1, tv_nsec: 0), timespec(tv_sec: 1, tv_nsec: 0)], 0), 0)
        let second = try run(["export", source, "--to", "oci:\(fx.root)/two", "--reproducible"])
        XCTAssertEqual(first, second, "the same tree gives the same manifest")
        let timed = try run(["export", source, "--to", "oci:\(fx.root)/three"])
        XCTAssertNotEqual(timed, first, "without --reproducible, times are kept")

        let inspected = try Spawn.run("/usr/bin/skopeo", ["inspect", "oci:\(fx.root)/two:latest"])
        XCTAssertEqual(inspected.status, 0, inspected.error)
        let layer = try Spawn.run("/bin/sh", ["-c", "for f in \"$1\"/blobs/sha256/*; do gzip -t \"$f\" 2>/dev/null && tar -tzf \"$f\"; done", "sh", fx.root + "/one"])
        XCTAssertEqual(layer.output.split(separator: "\n"), ["./", ".wh.gone", "-first", "z/", "z/file"])
    }
}
