@testable import ProxyBundleCore
import XCTest

/// Which node stands for the spellings of a name in a table whose names fold (see
/// NodeTable+Spellings.swift), found by the hash of its directory and key.
final class NodeSpellingTests: XCTestCase {
    private let root = Placement(top: 0, bottom: 1, isDirectory: true)

    private func remember(_ table: NodeTable, _ parent: NodeID, _ name: String, directory: Bool = false) -> NodeID {
        table.remember(parent: parent, name: Array(name.utf8), placement: directory ? Placement(top: 0, bottom: 0, isDirectory: true)
                       : .file(in: 0), kind: directory ? 4 : 8, identity: 7, resolvedAt: nil, in: table.generation)
    }

    /// Every spelling of a file, through every spelling of its directory, is one node; each
    /// spelling of a directory is a node of its own; names of another key are other nodes.
    /// Thousands of names, so that the index grows several times.
    func testSpellingsOfAFileAreOneNodeThroughEverySpellingOfItsDirectory() {
        let table = NodeTable(root: root, foldsNames: true)
        let data = remember(table, rootNodeID, "Data", directory: true)
        let upper = remember(table, rootNodeID, "DATA", directory: true)
        XCTAssertNotEqual(data, upper)
        let files = (0 ..< 3000).map { remember(table, data, "Rock\($0).dds") }
        for (index, id) in files.enumerated() {
            XCTAssertEqual(remember(table, upper, "rock\(index).DDS"), id)
        }
        XCTAssertEqual(Set(files).count, files.count)
        let street = remember(table, data, "Straße")
        XCTAssertEqual(remember(table, upper, "STRASSE"), street)
        XCTAssertNotEqual(remember(table, data, "Rock0.dd"), files[0])
        XCTAssertNotEqual(remember(table, rootNodeID, "Rock0.dds"), files[0], "another directory")
    }

    /// A file renamed to another key no longer stands for its old one: a new file of the old
    /// name is a node of its own, and the renamed one is found by its new key, in every
    /// spelling of it.
    func testARenamedFileNoLongerStandsForItsOldName() {
        let table = NodeTable(root: root, foldsNames: true)
        let old = remember(table, rootNodeID, "Old.txt")
        table.move(parent: rootNodeID, name: Array("Old.txt".utf8), to: rootNodeID, Array("New.txt".utf8))
        let fresh = remember(table, rootNodeID, "OLD.TXT")
        XCTAssertNotEqual(fresh, old)
        XCTAssertEqual(remember(table, rootNodeID, "old.txt"), fresh)
        XCTAssertEqual(remember(table, rootNodeID, "NEW.TXT"), old, "the renamed file stands for its new name")
        XCTAssertEqual(table.locked { $0.named.count }, 2)
    }

    /// A file removed, then forgotten, stands for its name no longer: a new file of that name
    /// is a node of its own, and the one removed left the index with its name.
    func testARemovedFileNoLongerStandsForItsName() {
        let table = NodeTable(root: root, foldsNames: true)
        let id = remember(table, rootNodeID, "Gone.txt")
        table.detach(parent: rootNodeID, name: Array("Gone.txt".utf8))
        table.forget(id, count: 1)
        XCTAssertNil(table.parent(of: id))
        let fresh = remember(table, rootNodeID, "GONE.TXT")
        XCTAssertNotEqual(fresh, id)
        XCTAssertEqual(remember(table, rootNodeID, "gone.txt"), fresh)
        XCTAssertEqual(table.locked { $0.named.count }, 1)
    }

    /// A name that came to lead to an entry of another kind (a file replaced by a directory of
    /// another spelling) is a new node, which stands for the name's spellings from then on:
    /// another spelling of the directory is another node of that directory, not of the file.
    func testTheNewestNodeOfANameStandsForItsSpellings() {
        let table = NodeTable(root: root, foldsNames: true)
        let file = remember(table, rootNodeID, "Item")
        let directory = remember(table, rootNodeID, "ITEM", directory: true)
        XCTAssertNotEqual(directory, file)
        let other = remember(table, rootNodeID, "item", directory: true)
        XCTAssertNotEqual(other, directory, "each spelling of a directory is a node")
        XCTAssertEqual(table.otherSpellings(of: other), [directory])
        XCTAssertEqual(Set(table.otherSpellings(of: directory)), [other])
    }

    /// The spellings of a directory are found from its standing node alone (not by a scan of
    /// every spelled directory), and stay right as spellings go: another spelling forgotten
    /// leaves the others; the standing node forgotten still groups those left.
    func testSpellingsOfADirectoryStayRightAsTheyGo() {
        let table = NodeTable(root: root, foldsNames: true)
        var groups: [[NodeID]] = []
        for index in 0 ..< 200 {
            groups.append(["Dir\(index)", "dir\(index)", "DIR\(index)"].map { remember(table, rootNodeID, $0, directory: true) })
        }
        for group in groups { XCTAssertEqual(Set(table.otherSpellings(of: group[0])), Set(group[1...])) }
        let group = groups[7]
        table.detach(parent: rootNodeID, name: Array("dir7".utf8))
        table.forget(group[1], count: 1)
        XCTAssertEqual(table.otherSpellings(of: group[0]), [group[2]])
        table.detach(parent: rootNodeID, name: Array("Dir7".utf8))
        table.forget(group[0], count: 1)
        XCTAssertEqual(table.otherSpellings(of: group[2]), [], "the standing node is gone")
        let file = remember(table, group[2], "File")
        let again = remember(table, rootNodeID, "dir7", directory: true)
        XCTAssertEqual(Set(table.otherSpellings(of: again)), [group[2]])
        XCTAssertEqual(remember(table, again, "FILE"), file, "one file through both spellings left")
        XCTAssertEqual(table.locked { $0.spellings.values.map(\.count).reduce(0, +) }, 199 * 2 + 2)
    }
}
