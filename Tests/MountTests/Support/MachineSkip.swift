import Foundation
import XCTest

/// The only skips a machine may legitimately have: what its kernel lacks. Every message
/// starts with `tag`, and Scripts/test.sh fails on any skip whose message does not: a test
/// never skips because of what is installed or configured (it sets up what it needs).
enum MachineSkip {
    static let tag = "kernel lacks:"

    /// The fuse module has no io_uring switch (FUSE over io_uring is not built in).
    static func noUring(_ detail: String = UringSwitch.path) -> XCTSkip {
        XCTSkip("\(tag) FUSE over io_uring (\(detail))")
    }

    /// A kernel overlayfs mount failed with `code`: a skip when the kernel has no overlayfs
    /// (ENODEV), a failure for any other reason (a refused option is the test's own mistake).
    static func overlayfs(_ code: Int32, options: String) -> Error {
        let text = "mount -t overlay -o \(options): \(String(cString: strerror(code)))"
        return code == ENODEV ? XCTSkip("\(tag) overlayfs (\(text))") : TestFailure(text)
    }
}
