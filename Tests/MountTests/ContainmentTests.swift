import Foundation
import XCTest

/// Nothing inside a layer can lead the daemon to a file outside the two layers.
final class ContainmentTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Reading a file and listing a directory of the main bundle through the mount leave
    /// their access times as they were (as on kernel overlayfs), though relatime would
    /// update them: reading the main bundle changes nothing in it. Without passthrough: reads
    /// that pass through go by the kernel's own descriptor, opened with the reader's flags.
    func testReadingTheMainBundleLeavesItsAccessTimesAlone() throws {
        try Disk.write(fx.inMain("res/readme"), "main res")
        try Disk.write(fx.inMain("res/other"), "other")
        fx.environment = ["PROXYBUNDLE_NO_PASSTHROUGH=1"]
        try fx.start()  // (which reads the main bundle for its checksum)
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
        for path in [fx.inMain("res"), fx.inMain("res/readme")] {
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        }
        XCTAssertEqual(try Disk.list(fx.inMount("res")).sorted(), ["other", "readme"])
        XCTAssertEqual(try Disk.read(fx.inMount("res/readme")), "main res")
        for path in [fx.inMain("res"), fx.inMain("res/readme")] {
            XCTAssertEqual(Disk.lstat(path).map { $0.st_atim.tv_sec }, 1_000_000, path)
        }
        try fx.acceptMainBundleAsItIs()  // the times this test set
    }

    func testNoPathThroughTheMountReachesASentinelOutsideTheLayers() throws {
        let outside = fx.root + "/outside"
        let secret = "sentinel-\(UInt64.random(in: 0...UInt64.max))"
        try Disk.write(outside + "/secret.txt", secret)
        // the substitution replaces a main directory with a symlink to the outside directory
        try Disk.write(fx.inMain("res/readme"), "main res")
        try Disk.symlink(fx.inSubstitution("res"), to: outside)
        try Disk.symlink(fx.inMain("up"), to: "../outside")
        try Disk.symlink(fx.inSubstitution("abs"), to: outside + "/secret.txt")
        try Disk.mkdir(fx.inSubstitution("deep/er"))
        try Disk.symlink(fx.inSubstitution("deep/er/escape"), to: "../../../outside")
        try fx.start()

        // the symlinks are shown as symlinks; the daemon never resolves them itself
        XCTAssertEqual(Disk.lstat(fx.inMount("res")).map { $0.st_mode & S_IFMT }, S_IFLNK)
        XCTAssertEqual(Disk.readLink(fx.inMount("res")), outside)
        XCTAssertEqual(Disk.readLink(fx.inMount("deep/er/escape")), "../../../outside")
        // walking the mount without following symlinks never yields the sentinel's content
        var seen: [String] = []
        try walk(fx.mountpoint, &seen)
        for path in seen where Disk.lstat(path).map({ $0.st_mode & S_IFMT }) == S_IFREG {
            XCTAssertNotEqual(try Disk.read(path), secret, "\(path) served the sentinel")
        }
        XCTAssertEqual(Disk.lstatError(fx.inMount("res/readme")), ENOENT, "main's res is shadowed by the symlink")
        XCTAssertEqual(try Disk.read(outside + "/secret.txt"), secret, "the sentinel is unchanged")
    }

    private func walk(_ path: String, _ seen: inout [String]) throws {
        for name in try Disk.list(path) {
            let child = path + "/" + name
            seen.append(child)
            if Disk.lstat(child).map({ $0.st_mode & S_IFMT }) == S_IFDIR { try walk(child, &seen) }
        }
    }
}
