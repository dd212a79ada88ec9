import Foundation
@testable import ProxyBundleDelivery
import XCTest

/// `TarReader` on its own: ustar headers, the PAX (`x`, `g`) and GNU (`L`, `K`) extensions,
/// numbers in octal and base-256, and every way a header is refused. Archives are written
/// header by header (`Archive`), as a hostile layer would be.
final class TarReaderTests: XCTestCase {
    /// A tar archive written by hand.
    struct Archive {
        var bytes: [UInt8] = []

        /// A header block; `fields` overrides fields by offset (raw bytes).
        static func header(_ name: String, type: UInt8 = UInt8(ascii: "0"), size: Int = 0, mode: Int = 0o644,
                           link: String = "", magic: String = "ustar\u{0}00", prefix: String = "",
                           fields: [Int: [UInt8]] = [:], checksum: Int? = nil) -> [UInt8] {
            var h = [UInt8](repeating: 0, count: 512)
            func put(_ bytes: [UInt8], _ offset: Int) { for (i, b) in bytes.enumerated() { h[offset + i] = b } }
            func octal(_ value: Int, _ offset: Int, _ length: Int) {
                let digits = String(value, radix: 8)
                put(Array((String(repeating: "0", count: length - 1 - digits.count) + digits).utf8), offset)
            }
            put(Array(name.utf8.prefix(100)), 0)
            octal(mode, 100, 8); octal(1000, 108, 8); octal(1001, 116, 8); octal(size, 124, 12); octal(1_600_000_000, 136, 12)
            h[156] = type
            put(Array(link.utf8.prefix(100)), 157)
            put(Array(magic.utf8), 257)
            octal(8, 329, 8); octal(9, 337, 8)
            put(Array(prefix.utf8.prefix(155)), 345)
            for (offset, bytes) in fields { put(bytes, offset) }
            put(Array(repeating: 0x20, count: 8), 148)
            octal(checksum ?? h.reduce(0) { $0 + Int($1) }, 148, 7)
            return h
        }

        mutating func add(_ header: [UInt8], _ content: [UInt8] = []) {
            bytes += header + content + [UInt8](repeating: 0, count: (512 - content.count % 512) % 512)
        }

        mutating func add(_ name: String, type: UInt8 = UInt8(ascii: "0"), content: [UInt8] = [], link: String = "") {
            add(Archive.header(name, type: type, size: content.count, link: link), content)
        }

        /// A PAX header of `records` (`x`, or `g` for global ones).
        mutating func pax(_ records: [(String, String)], global: Bool = false) {
            var data: [UInt8] = []
            for (key, value) in records {
                let body = " \(key)=\(value)\n"
                var length = body.utf8.count + 1
                while String(length).count + body.utf8.count != length { length += 1 }
                data += Array("\(length)\(body)".utf8)
            }
            add(Archive.header("PaxHeader", type: UInt8(ascii: global ? "g" : "x"), size: data.count), data)
        }

        mutating func end() { bytes += [UInt8](repeating: 0, count: 1024) }
    }

    var files: [String] = []

    override func tearDown() { files.forEach { unlink($0) } }

    /// The entries of `bytes`, each with its content; or the error.
    func read(_ bytes: [UInt8], maxEntries: Int = 100) throws -> [(entry: TarEntry, content: [UInt8])] {
        let path = FileManager.default.temporaryDirectory.path + "/pb-tar-\(UUID().uuidString)"
        files.append(path)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var reader = TarReader(stream: ByteStream(fd: fd, limit: 1 << 30), maxEntries: maxEntries)
        var out: [(TarEntry, [UInt8])] = []
        while let entry = try reader.next() {
            var content: [UInt8] = []
            try reader.content(entry) { content += $0 }
            out.append((entry, content))
        }
        return out
    }

    func assertRefused(_ bytes: [UInt8], _ rule: String, entry: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try read(bytes), file: file, line: line) { error in
            guard let refusal = error as? LayerRefusal else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertTrue(refusal.rule.contains(rule), refusal.rule, file: file, line: line)
            if let entry { XCTAssertEqual(String(decoding: refusal.entry, as: UTF8.self), entry, file: file, line: line) }
        }
    }

    func name(_ entry: TarEntry) -> String { String(decoding: entry.name, as: UTF8.self) }

    func testEveryKindOfEntryWithItsFields() throws {
        var tar = Archive()
        tar.add(Archive.header("d/", type: UInt8(ascii: "5"), mode: 0o4755))
        tar.add("d/f", content: Array("content".utf8))
        tar.add("d/s", type: UInt8(ascii: "2"), link: "f")
        tar.add("d/h", type: UInt8(ascii: "1"), link: "d/f")
        tar.add(Archive.header("d/c", type: UInt8(ascii: "3"), size: 5), [])  // a device's size is not content
        tar.add("d/p", type: UInt8(ascii: "6"))
        tar.add("d/b", type: UInt8(ascii: "4"))
        tar.add("d/contiguous", type: UInt8(ascii: "7"), content: [1])
        tar.add(Archive.header("old", type: 0, size: 1), [2])
        tar.add(Archive.header("olddir/", type: 0))
        tar.end()
        let entries = try read(tar.bytes)
        XCTAssertEqual(entries.map { name($0.entry) }, ["d/", "d/f", "d/s", "d/h", "d/c", "d/p", "d/b", "d/contiguous", "old", "olddir/"])
        XCTAssertEqual(entries.map(\.entry.kind), [.directory, .file, .symlink, .hardLink, .characterDevice, .fifo, .blockDevice,
                                                  .file, .file, .directory])
        let file = entries[1].entry
        XCTAssertEqual(entries[1].content, Array("content".utf8))
        XCTAssertEqual([file.mode, file.uid, file.gid], [0o644, 1000, 1001])
        XCTAssertEqual(file.size, 7)
        XCTAssertEqual(file.mtime.seconds, 1_600_000_000)
        XCTAssertEqual(entries[0].entry.mode, 0o4755, "set-ID bits are read (the writer drops them)")
        XCTAssertEqual(String(decoding: entries[2].entry.link, as: UTF8.self), "f")
        XCTAssertEqual(String(decoding: entries[3].entry.link, as: UTF8.self), "d/f")
        XCTAssertEqual(entries[4].entry.size, 0)
        XCTAssertEqual(entries[4].content, [])
        XCTAssertEqual(entries[4].entry.device.major, 8)
        XCTAssertEqual(entries[4].entry.device.minor, 9)
        XCTAssertEqual(entries[8].content, [2])
    }

    /// POSIX ustar joins the prefix field to the name; GNU's header (`ustar  `) has no prefix.
    func testThePrefixOfAPosixHeaderOnly() throws {
        var tar = Archive()
        tar.add(Archive.header("name", prefix: "a/b"))
        tar.add(Archive.header("gnu", magic: "ustar  \u{0}", prefix: "ignored"))
        tar.end()
        XCTAssertEqual(try read(tar.bytes).map { name($0.entry) }, ["a/b/name", "gnu"])
    }

    func testPaxRecordsOverrideTheHeader() throws {
        let long = String(repeating: "n", count: 300)
        var tar = Archive()
        tar.pax([("comment", "ignored"), ("mtime", "-1.25")], global: true)
        tar.pax([("path", "d/" + long), ("linkpath", "t/" + long), ("uid", "4294967297"), ("gid", "7"),
                 ("mtime", "1700000000.123456789123"), ("SCHILY.xattr.user.note", "a=b\nc"), ("size", "3")])
        tar.add(Archive.header("short", type: UInt8(ascii: "2"), size: 0), [])
        tar.add("plain", content: [1, 2])
        tar.end()
        let entries = try read(tar.bytes)
        XCTAssertEqual(name(entries[0].entry), "d/" + long)
        XCTAssertEqual(String(decoding: entries[0].entry.link, as: UTF8.self), "t/" + long)
        XCTAssertEqual(entries[0].entry.uid, 1, "a 64-bit id truncated as the header's")
        XCTAssertEqual(entries[0].entry.gid, 7)
        XCTAssertEqual(entries[0].entry.mtime.seconds, 1_700_000_000)
        XCTAssertEqual(entries[0].entry.mtime.nanoseconds, 123_456_789)
        XCTAssertEqual(entries[0].entry.size, 0, "a symlink has no content, whatever the PAX size")
        XCTAssertEqual(entries[0].entry.attributes.map(\.name), ["user.note"])
        XCTAssertEqual(entries[0].entry.attributes.first?.value, Array("a=b\nc".utf8))
        // the global record applies to every later entry; the per-entry ones to one
        XCTAssertEqual(name(entries[1].entry), "plain")
        XCTAssertEqual(entries[1].entry.mtime.seconds, -1)
        XCTAssertEqual(entries[1].entry.mtime.nanoseconds, -250_000_000)
        XCTAssertEqual(entries[1].content, [1, 2])
    }

    func testGnuLongNamesAndLinks() throws {
        let long = String(repeating: "l", count: 200)
        var tar = Archive()
        tar.add(Archive.header("././@LongLink", type: UInt8(ascii: "L"), size: long.utf8.count + 1), Array(long.utf8) + [0])
        tar.add(Archive.header("././@LongLink", type: UInt8(ascii: "K"), size: long.utf8.count), Array(long.utf8))
        tar.add("cut", type: UInt8(ascii: "1"), link: "cut")
        tar.end()
        let entries = try read(tar.bytes)
        XCTAssertEqual(entries.map { name($0.entry) }, [long])
        XCTAssertEqual(String(decoding: entries[0].entry.link, as: UTF8.self), long)
    }

    func testBase256Numbers() throws {
        var tar = Archive()
        tar.add(Archive.header("big", fields: [108: [0x80, 0, 0, 0, 0, 0, 0x01, 0x00]]))
        tar.end()
        XCTAssertEqual(try read(tar.bytes).first?.entry.uid, 256)
        var negative = Archive()
        negative.add(Archive.header("neg", fields: [124: [0xff] + [UInt8](repeating: 0xff, count: 11)]))
        assertRefused(negative.bytes, "a number in its header is negative", entry: "neg")
        var huge = Archive()
        huge.add(Archive.header("huge", fields: [124: [0x80] + [UInt8](repeating: 0xff, count: 11)]))
        assertRefused(huge.bytes, "a number in its header is too large", entry: "huge")
        var letters = Archive()
        letters.add(Archive.header("oct", fields: [124: Array("00000000009\u{0}".utf8)]))
        assertRefused(letters.bytes, "a number in its header is not octal", entry: "oct")
    }

    func testTheEndOfAnArchive() throws {
        var tar = Archive()
        tar.add("a", content: [1])
        XCTAssertEqual(try read(tar.bytes).count, 1, "a missing end block is tolerated")
        tar.end()
        tar.add("after the end", content: [2])
        XCTAssertEqual(try read(tar.bytes).count, 1, "nothing after the end block is read")
        XCTAssertEqual(try read([]).count, 0)
        var cut = Archive()
        cut.add(Archive.header("cut", size: 2000), [1, 2, 3])
        XCTAssertThrowsError(try read(cut.bytes)) { error in
            guard case ByteStream.Failure.truncated = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try read([UInt8](repeating: 7, count: 100))) { error in
            guard case ByteStream.Failure.truncated = error else { return XCTFail("\(error)") }
        }
    }

    func testWhatIsRefused() throws {
        var checksum = Archive()
        checksum.add(Archive.header("bad", checksum: 1))
        assertRefused(checksum.bytes, "its header checksum is wrong", entry: "bad")
        var type = Archive()
        type.add(Archive.header("socket", type: UInt8(ascii: "S")))
        assertRefused(type.bytes, "its type 'S' is not one a layer holds", entry: "socket")
        for records in ["5 a=b", "3 a=b\n", "x a=b\n", "6 ab\nx\n", "99 a=b\n"] {
            var pax = Archive()
            pax.add(Archive.header("PaxHeader", type: UInt8(ascii: "x"), size: records.utf8.count), Array(records.utf8))
            pax.add("f")
            assertRefused(pax.bytes, "its PAX header is malformed")
        }
        for (key, value, rule) in [("size", "-1", "its PAX size is not a number"), ("uid", "x", "its PAX uid is not a number"),
                                   ("mtime", "soon", "its PAX mtime is not a number")] {
            var tar = Archive()
            tar.pax([(key, value)])
            tar.add("f")
            assertRefused(tar.bytes, rule, entry: "f")
        }
        var large = Archive()
        large.add(Archive.header("././@LongLink", type: UInt8(ascii: "L"), size: (1 << 20) + 1))
        assertRefused(large.bytes, "an extension header is larger than 1 MiB")
        var many = Archive()
        for i in 0..<4 { many.add("f\(i)") }
        many.end()
        XCTAssertThrowsError(try read(many.bytes, maxEntries: 3)) { error in
            XCTAssertTrue("\(error)".contains("the layer has more than 3 entries"), "\(error)")
        }
        XCTAssertEqual(try read(many.bytes, maxEntries: 4).count, 4)
    }
}
