import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The mode shown without `-o acl` for an entry with an access ACL never grants more than
/// the ACL: the owning group gets at most its own entry, and nobody whom a named entry
/// covers gets more than that entry through the group or other bits.
final class ModeWithinACLTests: XCTestCase {
    private func acl(_ entries: [(UInt16, UInt8)]) -> [UInt8] {
        [2, 0, 0, 0] + entries.flatMap { [UInt8($0.0 & 0xFF), UInt8($0.0 >> 8), $0.1, 0, 0xFF, 0xFF, 0xFF, 0xFF] }
    }

    func testTheOwningGroupGetsNoMoreThanItsEntry() {
        // user::rw- user:12346:r-- group::--- mask::r-- other::---
        let value = acl([(0x01, 6), (0x02, 4), (0x04, 0), (0x10, 4), (0x20, 0)])
        XCTAssertEqual(Overlay.modeWithinACL(S_IFREG | 0o640, acl: value), S_IFREG | 0o600)
    }

    func testANamedEntryCapsTheGroupAndOtherBits() {
        // user::rwx user:12347:--x group::r-x mask::rwx other::r-x, set-group-ID
        let value = acl([(0x01, 7), (0x02, 1), (0x04, 5), (0x10, 7), (0x20, 5)])
        XCTAssertEqual(Overlay.modeWithinACL(S_IFDIR | 0o2775, acl: value), S_IFDIR | 0o2711)
    }

    func testAMinimalACLOrSomethingElseLeavesTheMode() {
        XCTAssertEqual(Overlay.modeWithinACL(S_IFREG | 0o644, acl: acl([(0x01, 6), (0x04, 4), (0x20, 4)])), S_IFREG | 0o644)
        XCTAssertEqual(Overlay.modeWithinACL(S_IFREG | 0o644, acl: [1, 2, 3]), S_IFREG | 0o644)
    }
}
