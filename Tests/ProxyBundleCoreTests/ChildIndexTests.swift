@testable import ProxyBundleCore
import XCTest

final class ChildIndexTests: XCTestCase {
    /// Random insertions, removals and renames, checked after every step against a dictionary
    /// keyed by parent and name: the index finds exactly what the dictionary holds, also
    /// across its growth and after removals that move entries back.
    func testIndexAgreesWithADictionaryThroughRandomChanges() {
        checkAgainstADictionary(folds: false)
    }

    /// The same where names fold, and the index hashes a name by its key: the spellings of a
    /// name in one directory share a probe chain, and each is found as itself only.
    func testIndexByKeysAgreesWithADictionaryThroughRandomChanges() {
        checkAgainstADictionary(folds: true)
    }

    private func checkAgainstADictionary(folds: Bool) {
        var generator = SeededNumbers(seed: 0x5eed)
        var state = NodeTable.State()
        state.named = ChildIndex(folds: folds)
        // where names fold, of two cases: names that differ only by case collide
        let letters = Array((folds ? "aAb" : "abc").utf8)
        var expected: [NodeTable.ChildKey: NodeID] = [:]
        var nextID: NodeID = 16
        // few parents and short names, so that names collide and probe chains form
        func randomKey() -> NodeTable.ChildKey {
            let length = Int(generator.next() % 40)  // short and long names
            let name = (0..<max(length, 1)).map { _ in letters[Int(generator.next() % 3)] }
            return NodeTable.ChildKey(parent: 1 + generator.next() % 4, name: name)
        }
        for step in 0..<20_000 {
            let key = randomKey()
            switch generator.next() % 4 {
            case 0, 1:
                // a new node named key (what the key led to before no longer has it)
                if let old = expected[key] { _ = state.removeChild(key); state.rename(old, to: detached) }
                let id = nextID
                nextID += 1
                state.nodes[id] = NodeTable.Node(parent: key.parent, name: key.name, lookups: 1,
                                                 placement: Placement.file(in: 0))
                state.setChild(key, id)
                expected[key] = id
            case 2:
                // as the table unlinks a name: the node that had it is detached
                let removed = state.removeChild(key)
                XCTAssertEqual(removed, expected.removeValue(forKey: key), "step \(step)")
                if let removed { state.rename(removed, to: detached) }
            default:
                // rename: a node takes the key's name
                guard let (oldKey, id) = expected.randomElement(using: &generator) else { continue }
                guard oldKey != key else { continue }
                if let other = expected[key] { _ = state.removeChild(key); state.rename(other, to: detached); expected[key] = nil }
                XCTAssertEqual(state.removeChild(oldKey), id)
                expected[oldKey] = nil
                state.rename(id, to: key)
                state.setChild(key, id)
                expected[key] = id
            }
            if step % 499 == 0 || step > 19_950 {
                for (key, id) in expected { XCTAssertEqual(state.child(key), id, "step \(step)") }
                XCTAssertEqual(state.named.count, expected.count)
                XCTAssertEqual(Set(state.childKeys()), Set(expected.keys))
            }
            XCTAssertNil(state.child(NodeTable.ChildKey(parent: 99, name: key.name)))
        }
        XCTAssertGreaterThan(expected.count, 1000, "the index grew several times")
    }

    private let detached = NodeTable.ChildKey(parent: NodeTable.detachedParent, name: NodeTable.deletedName)

    /// A name that is not the node's own (a hard link's other name) is found too, and goes
    /// with its removal.
    func testOtherNamesOfANodeAreFound() {
        var state = NodeTable.State()
        let own = NodeTable.ChildKey(parent: 1, name: Array("a".utf8))
        let other = NodeTable.ChildKey(parent: 1, name: Array("b".utf8))
        state.nodes[20] = NodeTable.Node(parent: 1, name: own.name, lookups: 1,
                                         placement: Placement.file(in: 0))
        state.setChild(own, 20)
        state.setChild(other, 20)
        XCTAssertEqual(state.child(own), 20)
        XCTAssertEqual(state.child(other), 20)
        XCTAssertEqual(state.named.count, 1)
        XCTAssertEqual(state.removeChild(other), 20)
        XCTAssertNil(state.child(other))
        XCTAssertEqual(state.child(own), 20)
    }
}

/// Repeatable pseudo-random numbers (Knuth's 64-bit linear congruential generator, high bits).
struct SeededNumbers: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state ^ (state >> 29)
    }
}

final class NodeTableNameTests: XCTestCase {
    private let file = Placement.file(in: 0)

    /// A name resolved before an invalidation (a lookup in flight while `.invalidate` is
    /// written) is not remembered as fresh: the invalidation's promise (every later access sees
    /// the layers as they are) would not hold for it. Before the fix the new node was fresh.
    func testANameResolvedBeforeAnInvalidationIsRememberedStale() throws {
        let root = Placement(top: 0, bottom: 1, isDirectory: true)
        let table = NodeTable(root: root)
        let resolvedAt = table.version
        _ = table.invalidate(root: root)
        let late = table.remember(parent: rootNodeID, name: Array("late".utf8), placement: file, kind: 8, identity: 7,
                                  resolvedAt: resolvedAt, in: table.generation)
        XCTAssertFalse(try table.location(of: late, in: table.generation).isFresh, "resolved before the invalidation")
        let now = table.remember(parent: rootNodeID, name: Array("now".utf8), placement: file, kind: 8, identity: 8,
                                 resolvedAt: table.version, in: table.generation)
        XCTAssertTrue(try table.location(of: now, in: table.generation).isFresh, "resolved after it")
    }

    /// A name resolved in a view the layers were swapped out of since (a lookup in flight
    /// during a swap) is stale for every later request, yet keeps the generation it was
    /// resolved in, which tells an open after the swap where its file was. Before the fix it
    /// kept none (0), and such an open answered ESTALE.
    func testANameResolvedBeforeASwapKeepsItsGeneration() throws {
        let root = Placement(top: 0, bottom: 1, isDirectory: true)
        let table = NodeTable(root: root)
        let before = table.generation, resolvedAt = table.version
        _ = table.invalidate(root: root)  // the swap: a new generation
        let late = table.remember(parent: rootNodeID, name: Array("late".utf8), placement: file, kind: 8, identity: 7,
                                  resolvedAt: resolvedAt, in: before)
        XCTAssertFalse(try table.location(of: late, in: table.generation).isFresh, "stale after the swap")
        XCTAssertEqual(table.lastKnownLocation(of: late, in: table.generation)?.resolvedIn, before.number)
        XCTAssertTrue(try table.location(of: late, in: before).isFresh, "as the request before the swap resolved it")
    }

    /// A forgotten node keeps its names (a lookup of either gets it back); once both are
    /// removed it goes and leaves no name behind, hard links' other names included.
    func testAForgottenNodeLeavesNoNameBehindOnceRemoved() {
        let table = NodeTable(root: Placement(top: 0, bottom: 1, isDirectory: true))
        let id = table.remember(parent: rootNodeID, name: Array("a".utf8), placement: file, kind: 8, identity: 7,
                                resolvedAt: nil, in: table.generation)
        table.addAlias(id, parent: rootNodeID, name: Array("b".utf8))
        table.forget(id, count: 2)
        table.locked { s in
            XCTAssertEqual(s.child(NodeTable.ChildKey(parent: rootNodeID, name: Array("a".utf8))), id)
            XCTAssertEqual(s.child(NodeTable.ChildKey(parent: rootNodeID, name: Array("b".utf8))), id)
        }
        table.detach(parent: rootNodeID, name: Array("a".utf8))
        XCTAssertNotNil(table.parent(of: id), "named b")
        table.detach(parent: rootNodeID, name: Array("b".utf8))
        XCTAssertNil(table.parent(of: id), "gone with its last name")
        table.locked { s in
            XCTAssertEqual(s.named.count, 0)
            XCTAssertTrue(s.aliasNames.isEmpty, "the link's name still leads to the forgotten node")
            XCTAssertNil(s.child(NodeTable.ChildKey(parent: rootNodeID, name: Array("b".utf8))))
        }
    }

    /// A hard link made onto a name the table still gives another node takes the name from it.
    func testALinkTakesItsNameFromTheNodeThatHadIt() throws {
        let table = NodeTable(root: Placement(top: 0, bottom: 1, isDirectory: true))
        let target = table.remember(parent: rootNodeID, name: Array("a".utf8), placement: file, kind: 8,
                                    identity: 7, resolvedAt: nil, in: table.generation)
        let other = table.remember(parent: rootNodeID, name: Array("b".utf8), placement: file, kind: 8,
                                   identity: 9, resolvedAt: nil, in: table.generation)
        table.addAlias(target, parent: rootNodeID, name: Array("b".utf8))
        XCTAssertThrowsError(try table.location(of: other, in: table.generation), "the old node still claims the name")
        XCTAssertEqual(try table.location(of: target, in: table.generation).path.bytes, Array("a".utf8))
        table.locked { s in
            XCTAssertEqual(s.child(NodeTable.ChildKey(parent: rootNodeID, name: Array("b".utf8))), target)
        }
    }
}
