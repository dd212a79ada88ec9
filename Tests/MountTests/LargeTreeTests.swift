import Foundation
import XCTest

/// Listings that span many readdir buffers, and large sparse files.
final class LargeTreeTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// 20,000 visible entries split across both layers, some shadowed, some whited out,
    /// read through many getdents calls, with telldir/seekdir positions that stay valid.
    func testTwentyThousandMergedEntriesWithSeekdir() throws {
        var expected = Set<String>()
        for i in 0..<11_000 {
            let name = "main-\(i).png"
            try touch(fx.inMain("big/" + name))
            expected.insert(name)
        }
        for i in 0..<9_500 {
            let name = "patch-\(i).strings"
            try touch(fx.inSubstitution("big/" + name))
            expected.insert(name)
        }
        for i in 0..<1_000 {  // shadowed: present in both, listed once
            try touch(fx.inSubstitution("big/main-\(i).png"))
        }
        for i in 10_500..<11_000 {  // whited out
            try Disk.whiteout(fx.inSubstitution("big"), "main-\(i).png")
            expected.remove("main-\(i).png")
        }
        XCTAssertEqual(expected.count, 20_000)
        try fx.start()

        guard let dir = opendir(fx.inMount("big")) else { throw TestFailure("opendir: \(errno)") }
        defer { closedir(dir) }
        var names: [String] = []
        var positions: [(index: Int, position: Int)] = []
        while true {
            if names.count % 1_777 == 0 { positions.append((names.count, telldir(dir))) }
            guard let entry = readdir(dir) else { break }
            let name = entryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        XCTAssertEqual(names.count, 20_000)
        XCTAssertEqual(Set(names), expected)
        XCTAssertEqual(names.count, Set(names).count, "a name was listed twice")

        // seeking back to any remembered position continues exactly where it was
        for (index, position) in positions.reversed() {
            seekdir(dir, position)
            var following: [String] = []
            while following.count < 5, let entry = readdir(dir) {
                let name = entryName(entry)
                if name != "." && name != ".." { following.append(name) }
            }
            let end = min(index + following.count, names.count)
            XCTAssertEqual(following, Array(names[index..<end]), "after seekdir to entry \(index)")
        }
        rewinddir(dir)
        var again = 0
        while let entry = readdir(dir) { if !["." , ".."].contains(entryName(entry)) { again += 1 } }
        XCTAssertEqual(again, 20_000)
    }

    /// A 1 GiB sparse file in the main bundle reads back as zeros with its few written bytes.
    func testSparseOneGibibyteFile() throws {
        let size: off_t = 1 << 30
        let marks: [(off_t, String)] = [(0, "start"), (size / 2 + 12_345, "middle"), (size - 3, "end")]
        let path = fx.inMain("huge.bin")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(ftruncate(fd, size), 0)
        for (offset, text) in marks { XCTAssertEqual(pwrite(fd, text, text.utf8.count, offset), text.utf8.count) }
        close(fd)
        try fx.start()

        let st = Disk.lstat(fx.inMount("huge.bin"))
        XCTAssertEqual(st?.st_size, size)
        XCTAssertLessThan(Int(st?.st_blocks ?? .max), 1024, "the file should stay sparse")
        let mfd = open(fx.inMount("huge.bin"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(mfd, 0)
        defer { close(mfd) }
        for (offset, text) in marks {
            var buffer = [UInt8](repeating: 0, count: text.utf8.count)
            XCTAssertEqual(pread(mfd, &buffer, buffer.count, offset), buffer.count)
            XCTAssertEqual(String(decoding: buffer, as: UTF8.self), text)
        }
        // the whole file, sequentially: zeros everywhere except the marks
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        let zeros = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        var nonZeroChunks: [off_t] = []
        while true {
            let count = read(mfd, &chunk, chunk.count)
            XCTAssertGreaterThanOrEqual(count, 0)
            if count <= 0 { break }
            if memcmp(chunk, zeros, count) != 0 { nonZeroChunks.append(offset >> 20) }
            offset += off_t(count)
        }
        XCTAssertEqual(offset, size)
        XCTAssertEqual(nonZeroChunks, marks.map { $0.0 >> 20 })
    }

    private func touch(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT, 0o644)
        if fd < 0 && errno == ENOENT {
            try Disk.makeParent(path)
            return try touch(path)
        }
        guard fd >= 0 else { throw TestFailure("create \(path): \(errno)") }
        close(fd)
    }

    private func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
        withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
    }
}
