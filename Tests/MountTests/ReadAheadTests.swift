import CSyscalls
import Foundation
import XCTest

/// Directories read ahead for a walk: once a program lists a directory after its parent, the
/// subdirectories of its listings are read on a thread of the daemon's own before it gets to
/// them. A program listing one directory makes the daemon read nothing more. Files read ahead
/// for a program that opens a directory's files in turn, and for no other.
final class ReadAheadTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        for index in 0..<40 {
            try Disk.write(fx.inMain("files/f\(index)"), String(repeating: "\(index % 10)", count: 5000 + index))
        }
        for a in 0..<6 {
            for b in 0..<5 {
                try Disk.write(fx.inMain("tree/a\(a)/b\(b)/file.txt"), "main \(a) \(b)")
                if b == 0 { try Disk.write(fx.inSubstitution("tree/a\(a)/b\(b)/patch.txt"), "patch \(a)") }
            }
        }
        try fx.start()
        // the main bundle's files leave the page cache (written back first), as on a cold start
        // (the fixture has just read them all, for its checksum)
        for index in 0..<40 {
            let fd = open(fx.inMain("files/f\(index)"), O_RDONLY)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(fsync(fd), 0)
            XCTAssertEqual(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0)
            close(fd)
        }
    }

    override func tearDown() { fx?.tearDown() }

    /// `.stats` figure `key` once the read-ahead thread has done all it was asked: what it was
    /// asked wrongly is counted only then, and the positive cases give it up to 10 s.
    private func settled(_ key: String) throws -> Int {
        try eventually("read-ahead done") { try fx.figure("read_ahead_pending") == 0 }
        return try fx.figure(key)
    }

    func testAWalkReadsAheadTheDirectoriesItIsAboutToList() throws {
        let walk = try Spawn.run("/usr/bin/find", [fx.inMount("tree"), "-printf", "%s %p\\n"])
        XCTAssertEqual(walk.status, 0, walk.error)
        let paths = walk.output.split(separator: "\n")
        XCTAssertEqual(paths.count, 1 + 6 + 30 + 30 + 6, "every entry once")
        XCTAssertEqual(try fx.stats()["walkers"], "find")
        // tree's subdirectories and theirs, less those listed before find was seen walking and
        // those find listed before the read-ahead thread (at a lower priority) got to them: on
        // a busy machine, a good part (the full suite once saw 21 of 36)
        XCTAssertGreaterThanOrEqual(try settled("directories_read_ahead"), 10)
    }

    func testListingOneDirectoryReadsNothingAhead() throws {
        let listed = try Spawn.run("/bin/ls", ["-l", fx.inMount("tree")])
        XCTAssertEqual(listed.status, 0, listed.error)
        XCTAssertEqual(listed.output.split(separator: "\n").filter { $0.hasPrefix("d") }.count, 6)
        XCTAssertEqual(try fx.stats()["walkers"], "")
        XCTAssertEqual(try settled("directories_read_ahead"), 0)
    }

    func testReadingADirectorysFilesInTurnReadsTheNextOnesAhead() throws {
        let names = try Disk.list(fx.inMount("files")).filter { $0 != "." && $0 != ".." }
        XCTAssertEqual(names.count, 40)
        // read here, in listing order, waiting for the read-ahead thread (at a lower priority,
        // so on a busy machine the reader could otherwise get to every file first) where an
        // open asks it: the 2nd asks for the next 16, every 8th after it for the 16 after it
        let asked = [2: 16, 10: 24, 18: 32, 26: 38]
        for (index, name) in names.enumerated() {
            let number = Int(name.dropFirst()) ?? 0
            XCTAssertEqual(try Disk.read(fx.inMount("files/\(name)")),
                           String(repeating: "\(number % 10)", count: 5000 + number))
            guard let expected = asked[index + 1] else { continue }
            try eventually("\(expected) files read ahead") { try fx.figure("files_read_ahead") >= expected }
            XCTAssertEqual(try settled("files_read_ahead"), expected, "after the open of file \(index + 1)")
        }
    }

    func testAProgramThatReadADirectoryInTurnHasTheNextReadAheadFromItsFirstFile() throws {
        // tree/a0/b0 holds one file: reading it in turn asks nothing; files/ is next
        let names = try Disk.list(fx.inMount("files")).filter { $0 != "." && $0 != ".." }
        let paths = ["tree/a0/b0/file.txt", "tree/a0/b0/patch.txt"].map(fx.inMount) + [fx.inMount("files/\(names[0])")]
        let read = try Spawn.run("/bin/cat", paths)
        XCTAssertEqual(read.status, 0, read.error)
        XCTAssertEqual(read.output.count, "main 0 0".count + "patch 0".count + 5000 + (Int(names[0].dropFirst()) ?? 0))
        // the b0 files ask for nothing after them; the first of files/ for the next 16
        try eventually("16 files read ahead") { try fx.figure("files_read_ahead") >= 16 }
        XCTAssertEqual(try settled("files_read_ahead"), 16)
    }

    /// A program that opens a directory's files in the order of their names (a sorted list of
    /// paths, as an app loading its resources by name) has the files that follow in name order
    /// read ahead (issue 25; before, the read-ahead went by listing order and read files the
    /// program did not come to, 1.7 times kernel overlayfs where listing order took 1.2).
    func testReadingADirectorysFilesInNameOrderReadsTheNextByNameAhead() throws {
        let listed = try Disk.list(fx.inMount("files")).filter { $0 != "." && $0 != ".." }
        let byName = listed.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        XCTAssertNotEqual(Array(listed.prefix(18)), Array(byName.prefix(18)), "the two orders differ here")
        for name in byName.prefix(2) { XCTAssertEqual(try Disk.read(fx.inMount("files/\(name)")).count, 5000 + (Int(name.dropFirst()) ?? 0)) }
        try checkReadAhead(byName[2..<18], count: 16, "the 16 after the second file by name")
    }

    /// Waits until `count` files were read ahead, then checks that `names` (main-bundle files of
    /// `files`) are the ones in the page cache.
    private func checkReadAhead(_ names: ArraySlice<String>, count: Int, _ what: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        try eventually("\(count) files read ahead") { try fx.figure("files_read_ahead") >= count }
        XCTAssertEqual(try settled("files_read_ahead"), count, what, file: file, line: line)
        for name in names {
            let fd = open(fx.inMain("files/\(name)"), O_RDONLY)
            XCTAssertGreaterThanOrEqual(fd, 0, file: file, line: line)
            XCTAssertGreaterThan(pb_cached_pages(fd, 1 << 20), 0, "\(name): \(what)", file: file, line: line)
            close(fd)
        }
    }

    /// Files found in the page cache by the read-ahead thread (the program read them before the
    /// thread got there: it runs at a lower priority) are passed over, and the files after them
    /// read ahead. Before, four such in a row made it give up on the whole directory, and a
    /// program reading a large directory fast had nothing read ahead for most of it.
    func testFilesTheProgramGotToFirstArePassedOver() throws {
        let names = try Disk.list(fx.inMount("files")).filter { $0 != "." && $0 != ".." }
        for name in names[2..<6] { _ = try Disk.read(fx.inMain("files/\(name)")) }  // cached, past the mount
        for name in names.prefix(2) { _ = try Disk.read(fx.inMount("files/\(name)")) }
        try checkReadAhead(names[6..<18], count: 12, "the 16 after the second file but the 4 cached")
    }

    /// A second reader that starts in a directory whose files were being read ahead for another
    /// (`xargs -n 256 cat` starts a process every 256 files) has the files after it read ahead
    /// too. Before, its second file, read ahead for the first reader, was taken for a sign of
    /// a directory in the page cache already, and nothing was read ahead for the new reader:
    /// every other `cat` read its 256 files cold (issue 25: the 20,000-file directory read in
    /// name order took 1.8 times kernel overlayfs, then 1.15 times).
    func testAReaderTakingOverFromAnotherHasTheFilesAfterItReadAhead() throws {
        let names = try Disk.list(fx.inMount("files")).filter { $0 != "." && $0 != ".." }
        for name in names.prefix(2) { _ = try Disk.read(fx.inMount("files/\(name)")) }
        try checkReadAhead(names[2..<18], count: 16, "the 16 after the second file")
        let read = try Spawn.run("/bin/cat", names[2..<12].map { fx.inMount("files/\($0)") })
        XCTAssertEqual(read.status, 0, read.error)
        // cat's second open asks for the 16 after it, its tenth for the 16 after that: the
        // files up to the 16th after its last, less those read ahead before
        try checkReadAhead(names[18..<28], count: 26, "the files after cat's, for cat")
    }

    func testOpeningOneFileADirectoryReadsNoFileAhead() throws {
        for index in [3, 17, 29] {
            XCTAssertEqual(try Disk.read(fx.inMount("files/f\(index)")).count, 5000 + index)
            XCTAssertEqual(try Disk.read(fx.inMount("tree/a0/b0/file.txt")), "main 0 0")
        }
        XCTAssertEqual(try settled("files_read_ahead"), 0)
    }
}
