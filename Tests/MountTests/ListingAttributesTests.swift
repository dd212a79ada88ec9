import Foundation
import XCTest

/// Which listed entries carry attributes (readdirplus): a program that only lists gets names
/// past a listing's first batch, one that stats or opens what it lists gets attributes once
/// the daemon has seen it look up a listed name. Either way every program sees the same
/// names, inode numbers and attributes.
final class ListingAttributesTests: XCTestCase {
    var fx: MountFixture!
    /// The size of each visible entry of `big`, by name (many readdir buffers' worth).
    var sizes: [String: Int] = [:]

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        for i in 0..<1_500 {
            try Disk.write(fx.inMain("big/main-\(i).png"), String(repeating: "m", count: i % 97))
            sizes["main-\(i).png"] = i % 97
        }
        for i in 0..<300 {  // shadowed, with other contents
            try Disk.write(fx.inSubstitution("big/main-\(i).png"), String(repeating: "p", count: 100 + i % 7))
            sizes["main-\(i).png"] = 100 + i % 7
        }
        for i in 0..<400 {
            try Disk.write(fx.inSubstitution("big/patch-\(i).strings"), String(repeating: "s", count: i % 13))
            sizes["patch-\(i).strings"] = i % 13
        }
        for i in 1_400..<1_500 {
            try Disk.whiteout(fx.inSubstitution("big"), "main-\(i).png")
            sizes["main-\(i).png"] = nil
        }
        try Disk.write(fx.inMain("tree/a/b/leaf.txt"), "leaf")
        try Disk.write(fx.inMain("tree/top.txt"), "top")
        try fx.start()
    }

    override func tearDown() { fx?.tearDown() }


    /// `find DIR -printf '%s %f'` through the mount, as name → size.
    private func findSizes(_ relative: String) throws -> [String: Int] {
        let found = try Spawn.run("/usr/bin/find", [fx.inMount(relative), "-mindepth", "1", "-maxdepth", "1", "-printf", "%s %f\\n"])
        XCTAssertEqual(found.status, 0, found.error)
        var result: [String: Int] = [:]
        for line in found.output.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { result[String(parts[1])] = Int(parts[0]) }
        }
        return result
    }

    /// Listing 1,800 entries (`ls -f`) leaves the daemon (and the
    /// kernel) without a node for most of them; the inode numbers listed are those a later
    /// stat reports.
    func testAListingNobodyStatsCarriesNoAttributesPastItsFirstBatch() throws {
        let before = try fx.figure("cached_nodes")
        let listed = try Spawn.run("/bin/ls", ["-f1", fx.inMount("big")])
        XCTAssertEqual(listed.status, 0, listed.error)
        XCTAssertEqual(Set(listed.output.split(separator: "\n").map(String.init)), Set(sizes.keys).union([".", ".."]))
        XCTAssertEqual(try fx.stats()["listing_users"], "", "ls -f is not known to stat what it lists")
        let nodes = try fx.figure("cached_nodes") - before
        XCTAssertGreaterThan(nodes, 0, "the first batch carries attributes")
        XCTAssertLessThan(nodes, 500, "nodes made by listing \(sizes.count) entries")
        let inodes = try inodeNumbers("big")
        XCTAssertEqual(Set(inodes.keys), Set(sizes.keys))
        for (name, size) in sizes {
            let st = Disk.lstat(fx.inMount("big/" + name))
            XCTAssertEqual(st.map { Int($0.st_size) }, size, name)
            XCTAssertEqual(st.map { UInt64($0.st_ino) }, inodes[name], "\(name): d_ino and st_ino")
        }
    }

    /// The names and `d_ino` of a directory through readdir(3), without "." and "..".
    private func inodeNumbers(_ relative: String) throws -> [String: UInt64] {
        guard let dir = opendir(fx.inMount(relative)) else { throw TestFailure("opendir: errno \(errno)") }
        defer { closedir(dir) }
        var result: [String: UInt64] = [:]
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { result[name] = UInt64(entry.pointee.d_ino) }
        }
        return result
    }

    /// Once `find` has looked up a name it listed, its later listings carry every entry's
    /// attributes: stating 1,800 listed entries then costs no LOOKUP each. Where the kernel
    /// keeps the listing `ls -f` got, with names alone, the first `find` reads that with a
    /// LOOKUP per entry, which drops it: the next gets the attributes again.
    func testAProgramKnownToStatWhatItListsGetsEveryAttribute() throws {
        XCTAssertEqual(try findSizes("tree").count, 2)
        XCTAssertEqual(try fx.stats()["listing_users"], "find")
        let listed = try Spawn.run("/bin/ls", ["-f1", fx.inMount("big")])
        XCTAssertEqual(listed.status, 0, listed.error)
        var before = try fx.figure("lookups")
        XCTAssertEqual(try findSizes("big"), sizes)
        XCTAssertGreaterThan(try fx.figure("lookups") - before, 1_000, "LOOKUP requests after ls -f, once")
        before = try fx.figure("lookups")
        let taken = try fx.figure("listings_taken")
        XCTAssertEqual(try findSizes("big"), sizes)
        XCTAssertLessThanOrEqual(try fx.figure("lookups") - before, 2, "LOOKUP requests afterwards")
        XCTAssertGreaterThan(try fx.figure("listings_taken"), taken, "the names-only listing was dropped by the lookups")
    }

    /// The kernel keeps a listing given with names alone: listing the directory again never
    /// reaches the daemon (issue 25: a warm `ls -f` of a huge directory); before, the listing
    /// was dropped after each `ls -f`, and every one took a listing of the daemon.
    func testAListingWithNamesAloneIsListedAgainByTheKernelAlone() throws {
        let first = try Spawn.run("/bin/ls", ["-f1", fx.inMount("big")])
        XCTAssertEqual(first.status, 0, first.error)
        let taken = try fx.figure("listings_taken")
        for _ in 0..<3 {
            let again = try Spawn.run("/bin/ls", ["-f1", fx.inMount("big")])
            XCTAssertEqual(again.status, 0, again.error)
            XCTAssertEqual(again.output, first.output)
        }
        XCTAssertEqual(try fx.figure("listings_taken"), taken, "listings taken by the repeated ls -f")
        XCTAssertEqual(try fx.stats()["listing_users"], "", "ls -f is still not known to stat what it lists")
    }

    /// A program not known yet that reads a whole listing before it stats an entry (`find`,
    /// through fts) costs LOOKUPs, but sees the same attributes; afterwards it is known.
    func testAProgramNotKnownYetSeesTheSameAttributes() throws {
        let before = try fx.figure("lookups")
        XCTAssertEqual(try findSizes("big"), sizes)
        XCTAssertGreaterThan(try fx.figure("lookups") - before, 1_000, "LOOKUP requests")
        XCTAssertEqual(try fx.stats()["listing_users"], "find")
    }

    /// `ls -l` stats each entry as it reads the listing: after the first batch's sample, it
    /// is known, and the rest of the listing carries attributes.
    func testAProgramThatStatsAsItListsIsKnownWithinTheListing() throws {
        let before = try fx.figure("lookups")
        let listed = try Spawn.run("/bin/ls", ["-l", "--time-style=+", fx.inMount("big")])
        XCTAssertEqual(listed.status, 0, listed.error)
        var seen: [String: Int] = [:]
        for line in listed.output.split(separator: "\n") where !line.hasPrefix("total") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 6, let size = Int(fields[4]) { seen[String(fields[fields.count - 1])] = size }
        }
        XCTAssertEqual(seen, sizes)
        XCTAssertLessThanOrEqual(try fx.figure("lookups") - before, 3, "LOOKUP requests")
        XCTAssertEqual(try fx.stats()["listing_users"], "ls")
    }
}
