import Foundation
import ProxyBundleCore
import XCTest

/// Scripts/demo.sh, the README's first command, with the built binary (no `swift build`, which
/// would wait for the build lock `swift test` holds).
final class DemoTests: XCTestCase {
    private static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/demo.sh").path
    }

    /// The listing through the mount must equal Examples/merged-view.txt: the control files
    /// (.invalidate, .stats, .layers) are not listed.
    func testDemoShowsTheExpectedMergedViewAndUnmounts() throws {
        let result = try Spawn.run("/bin/bash", [Self.script], environment: ["PROXYBUNDLE_BIN=\(MountFixture.binary)"],
                                   seconds: 120)
        XCTAssertEqual(result.status, 0, result.output + result.error)
        XCTAssertTrue(result.output.contains("listing matches Examples/merged-view.txt"), result.output)
        XCTAssertTrue(result.output.contains("Demo finished"), result.output)
        XCTAssertFalse(MountTable.current().mounts.contains { $0.mountpoint.description.contains("proxybundle-demo") }, "left mounted")
    }
}
