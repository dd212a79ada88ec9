import Foundation
import XCTest

/// Reading directories without OPENDIR round trips: the daemon answers the first OPENDIR
/// with ENOSYS, the kernel opens directories by itself from then on, and a listing lives in
/// the daemon from a readdir at offset 0 to its last entry, its offsets carrying a generation.
/// Readers that interleave, seek, or outnumber the listings kept still see each name once.
final class DirectoryReadingTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }


    /// `count` names in `dir`, split across the layers, some shadowed.
    private func makeDirectory(_ dir: String, count: Int) throws -> Set<String> {
        var names = Set<String>()
        for i in 0..<count {
            let name = "entry-\(i).dat"
            try Disk.write(i % 3 == 0 ? fx.inSubstitution("\(dir)/\(name)") : fx.inMain("\(dir)/\(name)"), "\(i)")
            if i % 10 == 1 { try Disk.write(fx.inSubstitution("\(dir)/\(name)"), "shadow") }
            names.insert(name)
        }
        return names
    }

    /// Reads up to `limit` names from an open directory (nil: to its end).
    private func read(_ dir: OpaquePointer, limit: Int? = nil) -> [String] {
        var names: [String] = []
        while limit.map({ names.count < $0 }) ?? true, let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Opening directories asks the daemon once per mount; a second walk is served by the
    /// kernel alone (no listing taken).
    func testDirectoriesOpenWithoutAskingTheDaemon() throws {
        for d in 0..<20 { _ = try makeDirectory("tree/d\(d)", count: 5) }
        try fx.start()
        for _ in 0..<2 {
            let walk = try Spawn.run("/usr/bin/find", [fx.inMount("tree"), "-printf", "%s\\n"])
            XCTAssertEqual(walk.status, 0, walk.error)
            XCTAssertEqual(walk.output.split(separator: "\n").count, 1 + 20 + 100)
        }
        XCTAssertEqual(try fx.figure("directory_opens"), 1)
        let taken = try fx.figure("listings_taken")
        XCTAssertGreaterThanOrEqual(taken, 21)
        let again = try Spawn.run("/usr/bin/find", [fx.inMount("tree"), "-printf", "%s\\n"])
        XCTAssertEqual(again.status, 0, again.error)
        XCTAssertEqual(try fx.figure("listings_taken"), taken, "a cached walk takes no listing")
    }

    /// Two readers of one directory, interleaved, one of them seeking back, and a file
    /// created in between: each unchanged name comes once to each reader.
    func testInterleavedReadersAndSeekdirSeeEachNameOnce() throws {
        try checkInterleavedReaders(options: [])
    }

    /// The same with `-o nocache`, where the daemon answers OPENDIR and the kernel keeps no
    /// listing.
    func testInterleavedReadersWithoutKernelCaching() throws {
        try checkInterleavedReaders(options: ["-o", "nocache"])
    }

    private func checkInterleavedReaders(options: [String]) throws {
        let names = try makeDirectory("big", count: 3_000)
        try fx.start(options)
        guard let first = opendir(fx.inMount("big")), let second = opendir(fx.inMount("big")) else {
            throw TestFailure("opendir: errno \(errno)")
        }
        defer { closedir(first); closedir(second) }
        var seenFirst = read(first, limit: 700)
        let mark = telldir(first)
        let afterMark = read(first, limit: 300)
        seenFirst += afterMark
        var seenSecond = read(second, limit: 1_100)
        try Disk.write(fx.inMount("big/added-while-reading.dat"), "new")
        seekdir(first, mark)
        XCTAssertEqual(read(first, limit: 300), afterMark, "the entries after a telldir position, again")
        seenFirst += read(first)
        seenSecond += read(second)
        for seen in [seenFirst, seenSecond] {
            let unchanged = seen.filter { $0 != "added-while-reading.dat" }
            XCTAssertEqual(unchanged.count, names.count, "names listed: twice \(Dictionary(grouping: unchanged.indices, by: { unchanged[$0] }).filter { $0.value.count > 1 })")
            XCTAssertEqual(Set(unchanged), names)
        }
    }

    /// More partly read listings than the daemon keeps (64): the ones pushed out are listed
    /// again when read on, and continue where they were.
    func testListingsPushedOutContinueWhereTheyWere() throws {
        var expected: [Set<String>] = []
        for d in 0..<70 { expected.append(try makeDirectory("many/d\(d)", count: 400)) }
        try fx.start()
        var open: [OpaquePointer] = []
        defer { open.forEach { closedir($0) } }
        var seen: [[String]] = []
        for d in 0..<70 {
            guard let dir = opendir(fx.inMount("many/d\(d)")) else { throw TestFailure("opendir: errno \(errno)") }
            open.append(dir)
            seen.append(read(dir, limit: 250))
        }
        let taken = try fx.figure("listings_taken")
        for d in 0..<70 {
            seen[d] += read(open[d])
            XCTAssertEqual(seen[d].count, 400, "d\(d)")
            XCTAssertEqual(Set(seen[d]), expected[d], "d\(d)")
        }
        XCTAssertGreaterThan(try fx.figure("listings_taken"), taken, "listings taken again")
    }

    /// A directory read that the layer's file system interrupts (getdents64 fails with EINTR,
    /// as a FUSE or network file system under a layer may answer it) is read again, not
    /// failed: each thread's first getdents64 of every two fails so, injected by strace
    /// into the daemon's every thread. Before the fix the listing failed.
    func testADirectoryReadInterruptedInALayerIsReadAgain() throws {
        let names = try makeDirectory("dir", count: 300)
        try fx.start()
        let tracer = try Spawn.start("/usr/bin/strace", ["-f", "-qq", "-p", "\(fx.daemon)", "-o", "/dev/null",
                                                         "-e", "trace=getdents64", "-e", "inject=getdents64:error=EINTR:when=1+2"])
        defer { kill(tracer, SIGKILL); _ = Spawn.wait(tracer, seconds: 10) }
        let tasks = "/proc/\(fx.daemon)/task"
        // every thread of the daemon traced
        try eventually("strace attached", within: 20) {
            try FileManager.default.contentsOfDirectory(atPath: tasks).allSatisfy { task in
                let status = (try? String(contentsOfFile: "\(tasks)/\(task)/status", encoding: .utf8)) ?? ""
                return status.split(separator: "\n").contains { $0.hasPrefix("TracerPid:") && !$0.hasSuffix("\t0") }
            }
        }
        let listed = Set(try Disk.list(fx.inMount("dir")))
        XCTAssertTrue(listed == names, "\(listed.count) of \(names.count) names listed")
        try Disk.write(fx.inMount("dir/new"), "new")
        let again = Set(try Disk.list(fx.inMount("dir")))
        XCTAssertTrue(again == names.union(["new"]), "\(again.count) of \(names.count + 1) names listed after a change")
        kill(tracer, SIGINT)
        XCTAssertNotNil(Spawn.wait(tracer, seconds: 10), "strace ended")
        XCTAssertFalse(fx.log.contains("EINTR"), fx.log)
    }
}
