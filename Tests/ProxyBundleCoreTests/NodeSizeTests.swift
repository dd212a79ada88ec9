@testable import ProxyBundleCore
import XCTest

final class NodeSizeTests: XCTestCase {
    /// Every cached name costs one node in a dictionary: keep it at 40 bytes (what few nodes
    /// need lives beside it, in `extras`).
    func testNodeStaysSmall() {
        XCTAssertLessThanOrEqual(MemoryLayout<NodeTable.Node>.stride, 40)
    }
}
