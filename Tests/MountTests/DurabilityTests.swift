import CSyscalls
import Foundation
import XCTest

/// What a copy-up leaves for a crash: its data is on the disk before the copy takes the
/// main-bundle file's place, as kernel overlayfs has it, so a power cut can never leave an
/// empty or partial copy hiding the main bundle's intact file. Checked by asking the page
/// cache (cachestat) whether any page of the copy is still dirty or being written.
final class DurabilityTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        try Disk.write(fx.inMain("file"), String(repeating: "data of the main bundle\n", count: 10_000))
        try Disk.write(fx.inMain("dir/inner"), String(repeating: "inner\n", count: 20_000))
        try fx.start()
    }

    override func tearDown() { fx?.tearDown() }

    /// The pages of the substitution's file at `relative` that are not on the disk yet.
    private func unwrittenPages(_ relative: String) throws -> Int {
        let fd = open(fx.inSubstitution(relative), O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(relative): errno \(errno)") }
        defer { close(fd) }
        let pages = Int(pb_unwritten_pages(fd, 0))
        guard pages >= 0 else { throw TestFailure("cachestat: errno \(-pages)") }
        return pages
    }

    func testACopiedUpFileIsOnTheDiskWhenTheChangeThatCopiedItReturns() throws {
        XCTAssertEqual(chmod(fx.inMount("file"), 0o600), 0)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("file")).count, 240_000)
        XCTAssertEqual(try unwrittenPages("file"), 0)
    }

    func testAMaterializedDirectorysFilesAreOnTheDiskWhenTheRenameReturns() throws {
        XCTAssertEqual(rename(fx.inMount("dir"), fx.inMount("moved")), 0)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("moved/inner")).count, 120_000)
        XCTAssertEqual(try unwrittenPages("moved/inner"), 0)
    }
}
