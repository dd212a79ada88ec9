import Foundation
import XCTest

/// The daemon remembers names found missing up to a limit (2^20; `PROXYBUNDLE_ABSENT_LIMIT`
/// lowers it here), past which it starts over. The kernel keeps its own negative entries of
/// those names (for `negative_timeout`, a day by default) because the daemon remembers them:
/// one it forgot would never be named to the kernel by an invalidation. So starting over tells
/// the kernel to forget them too.
class AbsentLimitTests: XCTestCase {
    var fx: MountFixture!
    static let limit = 64

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        fx.environment = ["PROXYBUNDLE_ABSENT_LIMIT=\(AbsentLimitTests.limit)"]
    }
    override func tearDown() { fx?.tearDown() }

    /// Before the fix, `new.png`, missing when first looked up, stayed missing through the
    /// mount after it was made on disk and everything invalidated (`/`), where the kernel is
    /// told name by name (before 6.16): the kernel's negative entry outlived the daemon's
    /// forgotten record of it, so the invalidation did not name it.
    func testANameMissingBeforeTheLimitAppearsAfterAnInvalidation() throws {
        try Disk.write(fx.inMain("a/old.png"), "old")
        try fx.start()
        XCTAssertEqual(Disk.lstatError(fx.inMount("new.png")), ENOENT)
        for index in 0 ..< AbsentLimitTests.limit * 3 / 2 { XCTAssertEqual(Disk.lstatError(fx.inMount("a/m\(index)")), ENOENT) }
        try Disk.write(fx.inSubstitution("new.png"), "new")
        let fd = open(fx.inMount(".invalidate"), O_WRONLY | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "/\n", 2), 2)
        close(fd)
        try expectFound(fx.inMount("new.png"))
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/m0")), ENOENT)
    }

    func expectFound(_ path: String) throws {
        XCTAssertEqual(try Disk.read(path), "new")
    }
}

/// The same through the notifications kernels before 6.16 understand: the names one by one,
/// by the notifier's worker once the lookup that reached the limit has its reply.
final class AbsentLimitFallbackTests: AbsentLimitTests {
    override func setUpWithError() throws {
        try super.setUpWithError()
        fx.environment += ["PROXYBUNDLE_NO_EPOCH=1"]
    }

    override func testANameMissingBeforeTheLimitAppearsAfterAnInvalidation() throws {
        try super.testANameMissingBeforeTheLimitAppearsAfterAnInvalidation()
    }

    override func expectFound(_ path: String) throws {
        try eventually("the kernel forgot the names the daemon did", within: 20) { Disk.lstatError(path) == 0 }
        try super.expectFound(path)
    }
}
