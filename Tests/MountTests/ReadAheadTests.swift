import Foundation
import XCTest

/// Directories read ahead for a walk: once a program lists a directory after its parent, the
/// subdirectories of its listings are read on a thread of the daemon's own before it gets to
/// them. A program listing one directory makes the daemon read nothing more.
final class ReadAheadTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        for a in 0..<6 {
            for b in 0..<5 {
                try Disk.write(fx.inMain("tree/a\(a)/b\(b)/file.txt"), "main \(a) \(b)")
                if b == 0 { try Disk.write(fx.inPatch("tree/a\(a)/b\(b)/patch.txt"), "patch \(a)") }
            }
        }
        try fx.start()
    }

    override func tearDown() { fx?.tearDown() }

    private func figure(_ key: String) throws -> Int { Int(try fx.stats()[key] ?? "") ?? -1 }

    func testAWalkReadsAheadTheDirectoriesItIsAboutToList() throws {
        let walk = try Spawn.run("/usr/bin/find", [fx.inMount("tree"), "-printf", "%s %p\\n"])
        XCTAssertEqual(walk.status, 0, walk.error)
        let paths = walk.output.split(separator: "\n")
        XCTAssertEqual(paths.count, 1 + 6 + 30 + 30 + 6, "every entry once")
        XCTAssertEqual(try fx.stats()["walkers"], "find")
        // tree's subdirectories and theirs, less those listed before find was seen walking
        XCTAssertGreaterThanOrEqual(try figure("directories_read_ahead"), 25)
    }

    func testListingOneDirectoryReadsNothingAhead() throws {
        let listed = try Spawn.run("/bin/ls", ["-l", fx.inMount("tree")])
        XCTAssertEqual(listed.status, 0, listed.error)
        XCTAssertEqual(listed.output.split(separator: "\n").filter { $0.hasPrefix("d") }.count, 6)
        XCTAssertEqual(try fx.stats()["walkers"], "")
        XCTAssertEqual(try figure("directories_read_ahead"), 0)
    }
}
