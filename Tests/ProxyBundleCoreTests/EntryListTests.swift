@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Names kept in one buffer, and the set the merge uses to find the substitution's names.
final class EntryListTests: OverlayTestCase {
    func testNamesComeBackAsTheyWentInAndAsCStrings() {
        var list = EntryList()
        let names: [[UInt8]] = [[0x2E], Array("a".utf8), Array("exactly8".utf8), Array("seventeen-bytes!!".utf8),
                                Array(repeating: 0x78, count: 255), Array("é.strings".utf8)]
        for (index, name) in names.enumerated() {
            list.append(name, type: UInt8(DT_REG), inode: UInt64(index), layer: index % 2 == 0 ? 0 : 1)
        }
        XCTAssertEqual(list.entries.map(list.name), names)
        XCTAssertEqual(list.entries.map(\.inode), Array(0 ..< UInt64(names.count)))
        XCTAssertEqual(list.entries.map(\.layer), names.indices.map { UInt16($0 % 2 == 0 ? 0 : 1) })
        list.withNames { buffer in
            for (entry, name) in zip(list.entries, names) {
                XCTAssertEqual(strlen(buffer.cString(entry)), name.count)
            }
        }
        list.filter { _, name in !EntryList.isDotOrDotDot(name) }
        XCTAssertEqual(list.entries.map(list.name), Array(names.dropFirst()))
    }

    func testNameSetHoldsExactlyWhatWasInserted() {
        var generator = SystemRandomNumberGenerator()
        // lengths around the 8-byte steps of the hash, names differing only in their last byte
        var inserted: [[UInt8]] = (0 ..< 3000).map { index in
            (0 ..< (index % 40)).map { _ in UInt8.random(in: 0x21 ... 0x7E, using: &generator) }
        }
        inserted += (0 ..< 50).map { Array("same-prefix-\(String(repeating: "x", count: $0 % 17))".utf8) + [UInt8($0)] }
        let others: [[UInt8]] = inserted.map { $0 + [0x2B] } + inserted.filter { !$0.isEmpty }.map { Array($0.dropLast()) }
        // sized for a tenth of them: it grows
        var set = NameSet(capacity: inserted.count / 10)
        XCTAssertTrue(set.isEmpty)
        withBuffers(inserted + others) { buffers in
            let (mine, theirs) = (buffers.prefix(inserted.count), buffers.dropFirst(inserted.count))
            for name in mine { set.insert(name) }
            for name in mine { set.insert(name) }  // again: no second copy
            XCTAssertFalse(set.isEmpty)
            for name in mine { XCTAssertTrue(set.contains(name)) }
            let insertedSet = Set(inserted)
            for (name, bytes) in zip(theirs, others) where !insertedSet.contains(bytes) {
                XCTAssertFalse(set.contains(name), "not inserted: \(bytes)")
            }
        }
    }

    func testMergedListingOfManyNamesMatchesTheLayers() throws {
        // 600 main names, 200 of them shadowed, 50 whited out, 100 new in the substitution
        for index in 0 ..< 600 { try write(.main, "many/m\(index)", "main") }
        for index in stride(from: 0, to: 600, by: 3) { try write(.patch, "many/m\(index)", "patch") }
        for index in stride(from: 1, to: 600, by: 12) { try write(.patch, "many/.wh.m\(index)", "") }
        for index in 0 ..< 100 { try write(.patch, "many/new\(index)", "new") }
        let overlay = try makeOverlay()
        let names = entryNames(try overlay.listDirectory(Request(overlay), try lookup(overlay, "many").node))
        let expected = (0 ..< 600).filter { $0 % 12 != 1 }.map { "m\($0)" } + (0 ..< 100).map { "new\($0)" }
        XCTAssertEqual(names, expected.sorted())
    }

    /// Runs `body` with each name in a buffer of its own.
    private func withBuffers(_ names: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) -> Void) {
        let buffers = names.map { name -> UnsafeMutableRawBufferPointer in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: name.count, alignment: 1)
            buffer.copyBytes(from: name)
            return buffer
        }
        defer { buffers.forEach { $0.deallocate() } }
        body(buffers.map { UnsafeRawBufferPointer($0) })
    }
}
