@testable import ProxyBundleCore
import XCTest

final class NodeSizeTests: XCTestCase {
    /// Every cached name costs one node in a page of the node store: keep it at 40 bytes
    /// (what few nodes need lives beside it, in `extras`).
    func testNodeStaysSmall() {
        XCTAssertLessThanOrEqual(MemoryLayout<NodeTable.Node>.stride, 40)
    }

    func node(_ name: String, lookups: UInt32 = 1) -> NodeTable.Node {
        NodeTable.Node(parent: rootNodeID, name: Array(name.utf8), lookups: lookups,
                       placement: Placement(inUpper: true, inLower: false, isDirectory: false))
    }

    /// The store answers what was put in, across pages, and forgets what was removed.
    func testNodeStoreKeepsAndDropsNodesAcrossPages() {
        var store = NodeStore()
        let ids: [NodeID] = [1, 16, 255, 256, 257, 10_000, 1 << 40]
        for id in ids { store[id] = node("n\(id)") }
        XCTAssertEqual(store.count, ids.count)
        for id in ids { XCTAssertEqual(store[id].map { String(decoding: $0.name, as: UTF8.self) }, "n\(id)") }
        XCTAssertNil(store[2])
        XCTAssertNil(store[258])
        store[256] = node("again", lookups: 3)
        XCTAssertEqual(store.count, ids.count, "replacing is not adding")
        XCTAssertEqual(store[256]?.lookups, 3)
        store[256] = nil
        store[256] = nil
        store[257] = nil
        XCTAssertEqual(store.count, ids.count - 2)
        XCTAssertNil(store[256])
        XCTAssertEqual(Set(store.all.map(\.id)), Set(ids).subtracting([256, 257]))
        store[300] = node("reuses an emptied page")
        XCTAssertEqual(store[300]?.name, Array("reuses an emptied page".utf8))
        XCTAssertNil(store[256])
    }
}
