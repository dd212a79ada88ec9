import Foundation
import XCTest

/// Nothing inside a layer can lead the daemon to a file outside the two layers.
final class ContainmentTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func testNoPathThroughTheMountReachesASentinelOutsideTheLayers() throws {
        let outside = fx.root + "/outside"
        let secret = "sentinel-\(UInt64.random(in: 0...UInt64.max))"
        try Disk.write(outside + "/secret.txt", secret)
        // the substitution replaces a main directory with a symlink to the outside directory
        try Disk.write(fx.inMain("res/readme"), "main res")
        try Disk.symlink(fx.inPatch("res"), to: outside)
        try Disk.symlink(fx.inMain("up"), to: "../outside")
        try Disk.symlink(fx.inPatch("abs"), to: outside + "/secret.txt")
        try Disk.mkdir(fx.inPatch("deep/er"))
        try Disk.symlink(fx.inPatch("deep/er/escape"), to: "../../../outside")
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
