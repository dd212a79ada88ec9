import Foundation
import ProxyBundleCore
import XCTest

/// telldir and seekdir in a large merged directory: every position telldir gave resumes exactly
/// where it was while the stream is open (also in the middle of reading, back and forth), and in
/// a stream opened again on the unchanged directory. The same holds on kernel overlayfs of the
/// same layers and on the layers' own file system (ext4 here).
final class SeekDirectoryTests: XCTestCase {
    func testEveryPositionResumesExactlyWhereItWas() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        for index in 0..<3000 { try Disk.write(fx.inMain("big/main-\(index)"), "") }
        for index in 2000..<4500 { try Disk.write(fx.inSubstitution("big/sub-\(index)"), "") }
        try Disk.whiteout(fx.inSubstitution("big"), "main-7")
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mount(fx, at: kernel)
        try fx.start()
        let merged = 3000 - 1 + 2500 + 2
        let mine = try checkPositions(fx.inMount("big"))
        XCTAssertEqual(mine.count, merged)
        XCTAssertEqual(Set(mine), Set(try checkPositions(kernel + "/big")), "the names kernel overlayfs lists")
        XCTAssertEqual(try checkPositions(fx.inMain("big")).count, 3000 + 2)
    }

    /// generic/676: any position below the last one telldir gave is a place in the listing, so
    /// seekdir to a number computed by the reader (not one telldir gave) reads an entry, never
    /// the end, as on kernel overlayfs and ext4.
    func testSeekingToAnyPositionBelowTheLastReadsAnEntry() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        for index in 0..<2000 { try Disk.write(fx.inMain("big/main-\(index)"), "") }
        for index in 0..<2000 { try Disk.write(fx.inSubstitution("big/sub-\(index)"), "") }
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mount(fx, at: kernel)
        try fx.start()
        XCTAssertEqual(try endsAtRandomPositions(kernel + "/big"), 0, "kernel overlayfs")
        XCTAssertEqual(try endsAtRandomPositions(fx.inMount("big")), 0, "proxybundle")
    }

    /// How many of 2,000 seekdirs to a random position below the largest telldir gave ended
    /// the stream.
    private func endsAtRandomPositions(_ directory: String) throws -> Int {
        guard let stream = opendir(directory) else { throw TestFailure("opendir \(directory): errno \(errno)") }
        defer { closedir(stream) }
        var last = 0
        while readdir(stream) != nil { last = max(last, telldir(stream)) }
        var generator = SystemRandomNumberGenerator()
        var ends = 0
        for _ in 0..<2000 {
            seekdir(stream, Int.random(in: 0..<last, using: &generator))
            if readdir(stream) == nil { ends += 1 }
        }
        return ends
    }

    /// Reads all of `directory` saving each position, then checks that every position resumes
    /// at its name, and returns the names.
    private func checkPositions(_ directory: String, file: StaticString = #filePath,
                                line: UInt = #line) throws -> [String] {
        guard let stream = opendir(directory) else { throw TestFailure("opendir \(directory): errno \(errno)") }
        var positions: [Int] = [], names: [String] = []
        while true {
            let position = telldir(stream)
            guard let entry = readdir(stream) else { break }
            positions.append(position)
            names.append(String(cString: directoryEntryName(entry)))
        }
        var generator = SystemRandomNumberGenerator()
        // back and forth, each time reading on a little from there
        for _ in 0..<300 {
            let index = Int.random(in: 0..<names.count, using: &generator)
            seekdir(stream, positions[index])
            for offset in 0..<3 where index + offset < names.count {
                guard let entry = readdir(stream) else {
                    XCTFail("\(directory): ended early at \(index + offset)", file: file, line: line)
                    break
                }
                XCTAssertEqual(String(cString: directoryEntryName(entry)), names[index + offset],
                               "\(directory): after seekdir to \(index)", file: file, line: line)
            }
        }
        seekdir(stream, positions[1000])
        var rest = 0
        while readdir(stream) != nil { rest += 1 }
        XCTAssertEqual(rest, names.count - 1000, "\(directory): from position 1000 to the end", file: file, line: line)
        closedir(stream)

        // a stream opened again on the unchanged directory takes the old positions
        guard let again = opendir(directory) else { throw TestFailure("opendir \(directory): errno \(errno)") }
        defer { closedir(again) }
        for index in stride(from: names.count - 1, to: 0, by: -401) {
            seekdir(again, positions[index])
            XCTAssertEqual(readdir(again).map { String(cString: directoryEntryName($0)) }, names[index],
                           "\(directory): position \(index) in a stream opened again", file: file, line: line)
        }
        return names
    }
}
