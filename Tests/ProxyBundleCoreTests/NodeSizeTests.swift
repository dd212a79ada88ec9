@testable import ProxyBundleCore
import XCTest

final class NodeSizeTests: XCTestCase {
    /// Every cached name costs one node in a page of the node store: keep it at 64 bytes, a
    /// name of up to 31 bytes included (what few nodes need lives beside it, in `extras`).
    func testNodeStaysSmall() {
        XCTAssertLessThanOrEqual(MemoryLayout<NodeTable.Node>.stride, 64)
    }

    /// A listing's entry stays 16 bytes with a two-byte layer number (its type and flags share
    /// a byte).
    func testAListingEntryStaysSixteenBytes() {
        XCTAssertEqual(MemoryLayout<EntryList.Entry>.stride, 16)
        var list = EntryList()
        list.append(Array("name".utf8), type: UInt8(DT_DIR), inode: 7, layer: 10_001)
        XCTAssertEqual(list.entries.first?.layer, 10_001)
        XCTAssertEqual(list.entries.first?.type, UInt8(DT_DIR))
    }

    /// Names of up to 31 bytes live in the node; longer ones keep every byte too.
    func testNamesKeepTheirBytesAtEveryLength() {
        for length in [0, 1, 8, 23, 30, 31, 32, 33, 255] {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            let name = NodeName(bytes)
            XCTAssertEqual(name.bytes, bytes, "length \(length)")
            XCTAssertEqual(name.count, length)
            XCTAssertTrue(name.matches(bytes))
            XCTAssertFalse(name.matches(bytes + [0]), "a longer name differs")
            XCTAssertFalse(name.matches(Array(bytes.dropLast())) && length > 0, "a shorter name differs")
            if case .short = name { XCTAssertLessThanOrEqual(length, 31) } else { XCTAssertGreaterThan(length, 31) }
        }
        XCTAssertNotEqual(NodeName([0x61]), NodeName([0x61, 0]), "a trailing zero byte counts")
    }

    func node(_ name: String, lookups: UInt32 = 1) -> NodeTable.Node {
        NodeTable.Node(parent: rootNodeID, name: Array(name.utf8), lookups: lookups,
                       placement: Placement.file(in: 0))
    }

    /// The store answers what was put in, across pages, and forgets what was removed.
    func testNodeStoreKeepsAndDropsNodesAcrossPages() {
        var store = NodeStore()
        let ids: [NodeID] = [1, 16, 255, 256, 257, 10_000, 1 << 40]
        for id in ids { store[id] = node("n\(id)") }
        XCTAssertEqual(store.count, ids.count)
        for id in ids { XCTAssertEqual(store[id].map { String(decoding: $0.name.bytes, as: UTF8.self) }, "n\(id)") }
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
        var seen: [NodeID] = []
        store.forEach { id, _ in seen.append(id) }
        XCTAssertEqual(Set(seen), Set(ids).subtracting([256, 257]))
        XCTAssertEqual(seen.count, Set(seen).count, "each node once")
        store[300] = node("reuses an emptied page")
        XCTAssertEqual(store[300]?.name.bytes, Array("reuses an emptied page".utf8))
        XCTAssertNil(store[256])
    }
}
