import Foundation
@testable import ProxyBundleCore
import XCTest

/// The lock order written in docs/DESIGN.md is the one the code checks (`LockRank`).
final class LockRankTests: XCTestCase {
    /// The rows of DESIGN.md's table of lock ranks: rank, name, leaf, no system call.
    private func writtenRanks() throws -> [(rank: Int, name: String, leaf: Bool, noSystemCall: Bool)] {
        let design = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/DESIGN.md")
        let text = try String(contentsOf: design, encoding: .utf8)
        guard let start = text.range(of: "<!-- lock ranks: checked against LockRank by LockRankTests -->"),
              let end = text.range(of: "<!-- end of lock ranks -->", range: start.upperBound..<text.endIndex) else {
            XCTFail("DESIGN.md has no table of lock ranks")
            return []
        }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 7, let rank = Int(cells[1]) else { return nil }
            return (rank, cells[2].trimmingCharacters(in: CharacterSet(charactersIn: "`")), cells[4] == "yes", cells[5] == "yes")
        }
    }

    func testDesignsTableIsTheRanksInOrder() throws {
        let written = try writtenRanks()
        let code = LockRank.allCases.sorted { $0.rawValue < $1.rawValue }
        XCTAssertEqual(written.map(\.name), code.map { "\($0)" })
        XCTAssertEqual(written.map(\.rank), code.map(\.rawValue))
        XCTAssertEqual(written.map(\.leaf), code.map(\.isLeaf))
        XCTAssertEqual(written.map(\.noSystemCall), code.map(\.forbidsSystemCalls))
    }

    func testLeavesComeLast() {
        let ranks = LockRank.allCases.sorted { $0.rawValue < $1.rawValue }
        XCTAssertEqual(ranks.map(\.isLeaf), ranks.map(\.isLeaf).sorted { !$0 && $1 })
    }
}
