import Foundation
import XCTest

/// fsx-style data integrity: seeded random pread, pwrite (often past the end, leaving holes),
/// ftruncate (growing and shrinking), reads and writes through shared mappings (MAP_SHARED,
/// msync), fsync and fdatasync, close and reopen (sometimes with O_TRUNC), reads through a
/// second descriptor, fstat and lstat sizes, and writes to `.invalidate` with the file open, all
/// on one file of a mount, checked against an in-memory model of the file's content after every
/// read, in full every 1,000 operations and at the end, then on disk in the substitution and
/// through a fresh mount.
///
/// Two files: a new one, and a main-bundle file (with a hole) whose first change copies it up;
/// that test also checks that the main bundle is unchanged.
///
/// On a mismatch the test fails with the seed, the operation's index, the last 20 operations
/// and the first differing offset. Environment: `INTEGRITY_SEEDS=1,0x2a` (each test runs each
/// seed; default one seed per test) and `INTEGRITY_OPS=20000` (operations per seed).
final class IntegrityTests: XCTestCase {
    static let defaultOps = 20_000

    func testRandomIOOnANewFileMatchesTheModel() throws {
        try runSeeds(defaultSeed: 1) { fx, _ in
            try fx.start()
            return (path: fx.inMount("dir/new.bin"), model: nil, patchFile: fx.inSubstitution("dir/new.bin"))
        }
    }

    func testRandomIOOnAMainBundleFileMatchesTheModelAndLeavesTheMainBundleAlone() throws {
        try runSeeds(defaultSeed: 2, stream: 0x6D61_696E) { fx, seed in
            var random = SplitMix(seed ^ 0xABCD)
            var content = [UInt8](repeating: 0, count: 300_000)
            for i in 0..<100_000 { content[i] = UInt8(truncatingIfNeeded: random.next()) }
            for i in 250_000..<300_000 { content[i] = UInt8(truncatingIfNeeded: random.next()) }
            try Disk.mkdir(fx.inMain("dir"))
            let fd = open(fx.inMain("dir/main.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            guard fd >= 0 else { throw TestFailure("create: errno \(errno)") }
            defer { close(fd) }
            // a hole in the middle: only the two data ranges are written
            guard pwrite(fd, content, 100_000, 0) == 100_000,
                  content[250_000...].withUnsafeBytes({ pwrite(fd, $0.baseAddress, 50_000, 250_000) }) == 50_000
            else { throw TestFailure("write: errno \(errno)") }
            try fx.start()
            return (path: fx.inMount("dir/main.bin"), model: content, patchFile: fx.inSubstitution("dir/main.bin"))
        }
    }

    /// The checker must notice a file that differs from its model: one byte changed behind
    /// the mount, in the substitution, made visible by `.invalidate`.
    func testCheckerNoticesAByteChangedBehindTheMount() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try fx.start()
        let run = try FsxRun(seed: 3, path: fx.inMount("f"), invalidate: fx.inMount(".invalidate"), model: nil)
        defer { run.close() }
        XCTAssertNil(try run.run(operations: 300))
        XCTAssertNil(try run.compareAll(.fullCompare))
        guard run.model.count > 10 else { return XCTFail("the run left an empty file") }
        let fd = open(fx.inSubstitution("f"), O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var byte = run.model[7] ^ 0xFF
        XCTAssertEqual(pwrite(fd, &byte, 1, 7), 1)
        close(fd)
        try Disk.write(fx.inMount(".invalidate"), "\n")
        run.reopenForCheck()
        let failure = try run.compareAll(.fullCompare)
        XCTAssertNotNil(failure)
        XCTAssertTrue(failure?.contains("first difference at offset 7") == true, failure ?? "")
    }

    // MARK: running seeds

    typealias Setup = (MountFixture, UInt64) throws -> (path: String, model: [UInt8]?, patchFile: String)

    /// `stream` is mixed into each seed, so that the two files do not get the same operations
    /// when INTEGRITY_SEEDS gives both tests the same seed.
    private func runSeeds(defaultSeed: UInt64, stream: UInt64 = 0, _ setup: Setup) throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds = environment["INTEGRITY_SEEDS"].map(RandomOperationsTests.parseSeeds) ?? [defaultSeed]
        let operations = environment["INTEGRITY_OPS"].flatMap { Int($0) } ?? IntegrityTests.defaultOps
        var failures: [String] = []
        for seed in seeds {
            let started = Date()
            let fx = try MountFixture(name + "\(seed)")
            defer { fx.tearDown() }
            let (path, initial, patchFile) = try setup(fx, seed)
            // taken before the first mount: a second start() would take the main bundle as it is then
            let mainBefore = try TreeChecksum.of(fx.main)
            let run = try FsxRun(seed: seed ^ stream, path: path, invalidate: fx.inMount(".invalidate"), model: initial)
            var failure = try run.run(operations: operations)
            run.close()
            if failure == nil { failure = try run.compareAll(.fullCompare) }
            if failure == nil {
                fx.stop()
                if let difference = FsxRun.firstDifference(try FsxRun.contents(of: patchFile), run.model) {
                    failure = "the substitution's file on disk differs from the model after the unmount: \(difference)"
                } else {
                    try fx.start()
                    run.reopenForCheck()
                    if let difference = try run.compareAll(.fullCompare) { failure = "after a remount: " + difference }
                    run.close()
                }
            }
            if try TreeChecksum.of(fx.main) != mainBefore { failure = (failure ?? "") + "\nthe main bundle was modified" }
            let counts = run.counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            print("integrity seed 0x\(String(seed, radix: 16)) on \(URL(fileURLWithPath: path).lastPathComponent): "
                  + "\(run.index) operation(s) in " + String(format: "%.1f", Date().timeIntervalSince(started))
                  + " s, final size \(run.model.count), \(counts)")
            if let failure {
                failures.append("seed 0x\(String(seed, radix: 16)) (INTEGRITY_SEEDS=0x\(String(seed, radix: 16))), "
                                + "operation \(run.index):\n\(failure)\nlast operations:\n" + run.history.joined(separator: "\n")
                                + "\ndaemon warnings:\n" + fx.log.split(separator: "\n").filter { $0.contains("warning") }.suffix(20).joined(separator: "\n"))
            }
        }
        XCTAssertTrue(failures.isEmpty, "\(failures.count) of \(seeds.count) seed(s) failed:\n\n" + failures.joined(separator: "\n\n"))
    }
}

struct SplitMix {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
}

/// One file of a mount and its model. Every check returns a description of the first
/// mismatch, or nil.
final class FsxRun {
    enum Op: String {
        case read, write, truncate, mmapRead, mmapWrite, fsync, reopen, secondRead, firstRead, stat, invalidate, fullCompare
    }

    static let maxSize = 1 << 20
    static let page = Int(sysconf(Int32(_SC_PAGESIZE)))

    let path: String
    let invalidatePath: String
    var random: SplitMix
    var model: [UInt8]
    /// O_RDONLY until the first change (a main-bundle file is copied up by the reopen for
    /// writing), O_RDWR after.
    var fd: Int32 = -1
    var writable: Bool
    /// A read-only descriptor opened at the start and kept open throughout (for a main-bundle
    /// file: opened before the copy-up), through which reads must see every change too.
    var first: Int32 = -1
    private(set) var index = 0
    private(set) var history: [String] = []
    private(set) var counts: [String: Int] = [:]
    /// Bytes written are slices of this at random offsets (generating them byte by byte is
    /// slow in a debug build); a write put at the wrong offset still shows.
    private var pool: [UInt8] = []

    /// `model` is the file's content, or nil to create the file (empty).
    init(seed: UInt64, path: String, invalidate: String, model: [UInt8]?) throws {
        self.path = path
        invalidatePath = invalidate
        var random = SplitMix(seed)
        var pool = [UInt8](repeating: 0, count: 2 << 20)
        pool.withUnsafeMutableBytes { raw in
            for i in 0..<raw.count / 8 { raw.storeBytes(of: random.next(), toByteOffset: i * 8, as: UInt64.self) }
        }
        self.random = random
        self.pool = pool
        if let model {
            self.model = model
            writable = false
            fd = open(path, O_RDONLY)
        } else {
            self.model = []
            writable = true
            try Disk.makeParent(path)
            fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o644)
        }
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        first = open(path, O_RDONLY)
        guard first >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        if first >= 0 { Glibc.close(first) }
        fd = -1
        first = -1
    }

    /// Opens the file again (read-only), after a remount or a change behind the mount.
    func reopenForCheck() {
        close()
        fd = open(path, O_RDONLY)
        writable = false
    }

    private func note(_ text: String) {
        history.append("#\(index) \(text)")
        if history.count > 20 { history.removeFirst() }
    }

    private func count(_ op: Op) { counts[op.rawValue, default: 0] += 1 }

    func run(operations: Int) throws -> String? {
        for _ in 0..<operations {
            if let failure = try step() { return failure }
            index += 1
        }
        return nil
    }

    private func pick() -> Op {
        if index > 0 && index % 1000 == 0 { return .fullCompare }
        let table: [(Op, Int)] = [
            (.read, 22), (.write, 22), (.truncate, 6), (.mmapRead, 7), (.mmapWrite, 7), (.fsync, 3),
            (.reopen, 3), (.secondRead, 4), (.firstRead, 2), (.stat, 3), (.invalidate, 1),
        ]
        var roll = random.below(table.reduce(0) { $0 + $1.1 })
        for (op, weight) in table {
            if roll < weight { return op }
            roll -= weight
        }
        return .read
    }

    /// An offset: mostly inside the file, sometimes past its end.
    private func offset() -> Int {
        random.chance(75) ? random.below(model.count + 1) : random.below(FsxRun.maxSize)
    }

    private func length() -> Int {
        random.chance(80) ? 1 + random.below(4096) : 1 + random.below(64 << 10)
    }

    private func bytes(_ count: Int) -> [UInt8] {
        let start = random.below(pool.count - count)
        return Array(pool[start..<start + count])
    }

    private func makeWritable() -> String? {
        guard !writable else { return nil }
        close()
        fd = open(path, O_RDWR)
        guard fd >= 0 else { return "open O_RDWR: errno \(errno)" }
        writable = true
        note("reopen O_RDWR (first change)")
        return nil
    }

    private func step() throws -> String? {
        let op = pick()
        count(op)
        switch op {
        case .read:
            let (offset, length) = (random.chance(90) ? random.below(model.count + 1) : self.offset(), self.length())
            note("pread offset \(offset) length \(length) (size \(model.count))")
            return readAndCompare(fd, offset: offset, length: length, what: "pread")
        case .write:
            if let failure = makeWritable() { return failure }
            let (offset, data) = (self.offset(), bytes(length()))
            note("pwrite offset \(offset) length \(data.count) (size \(model.count))")
            let written = pwrite(fd, data, data.count, off_t(offset))
            guard written == data.count else { return "pwrite returned \(written), errno \(errno)" }
            apply(data, at: offset)
        case .truncate:
            if let failure = makeWritable() { return failure }
            let size = random.chance(50) ? random.below(model.count + 1) : random.below(FsxRun.maxSize)
            note("ftruncate \(size) (size \(model.count))")
            guard ftruncate(fd, off_t(size)) == 0 else { return "ftruncate: errno \(errno)" }
            resize(size)
        case .mmapRead, .mmapWrite:
            guard !model.isEmpty else { return nil }
            if op == .mmapWrite, let failure = makeWritable() { return failure }
            let start = random.below(model.count) / FsxRun.page * FsxRun.page
            let length = min(model.count - start, 1 + random.below(256 << 10))
            return op == .mmapRead ? mmapRead(start, length) : mmapWrite(start, length)
        case .fsync:
            let data = random.chance(50)
            note(data ? "fdatasync" : "fsync")
            guard (data ? fdatasync(fd) : Glibc.fsync(fd)) == 0 else { return "fsync: errno \(errno)" }
        case .reopen:
            let truncate = writable && random.chance(10)
            note(truncate ? "close, open O_RDWR|O_TRUNC" : "close, open again")
            close()
            fd = open(path, writable ? (O_RDWR | (truncate ? O_TRUNC : 0)) : O_RDONLY)
            guard fd >= 0 else { return "open: errno \(errno)" }
            if truncate { model = [] }
        case .secondRead:
            let (offset, length) = (random.below(model.count + 1), self.length())
            note("open a second descriptor, pread offset \(offset) length \(length) (size \(model.count))")
            let other = open(path, O_RDONLY)
            guard other >= 0 else { return "open: errno \(errno)" }
            defer { Glibc.close(other) }
            return readAndCompare(other, offset: offset, length: length, what: "pread through a second descriptor")
        case .firstRead:
            guard first >= 0 else { return nil }
            let (offset, length) = (random.below(model.count + 1), self.length())
            note("pread through the descriptor opened first, offset \(offset) length \(length) (size \(model.count))")
            return readAndCompare(first, offset: offset, length: length, what: "pread through the descriptor opened first")
        case .stat:
            note("fstat, lstat (size \(model.count))")
            var st = Glibc.stat()
            guard fstat(fd, &st) == 0 else { return "fstat: errno \(errno)" }
            guard Int(st.st_size) == model.count else { return "fstat size \(st.st_size), model \(model.count)" }
            guard lstat(path, &st) == 0 else { return "lstat: errno \(errno)" }
            guard Int(st.st_size) == model.count else { return "lstat size \(st.st_size), model \(model.count)" }
        case .invalidate:
            note("write .invalidate with the file open")
            let control = open(invalidatePath, O_WRONLY)
            guard control >= 0 else { return "open .invalidate: errno \(errno)" }
            defer { Glibc.close(control) }
            guard Glibc.write(control, "\n", 1) == 1 else { return "write .invalidate: errno \(errno)" }
        case .fullCompare:
            return try compareAll(.fullCompare)
        }
        return nil
    }

    private func apply(_ data: [UInt8], at offset: Int) {
        if offset + data.count > model.count { resize(offset + data.count) }
        model.withUnsafeMutableBytes { target in
            data.withUnsafeBytes { (target.baseAddress! + offset).copyMemory(from: $0.baseAddress!, byteCount: data.count) }
        }
    }

    private func resize(_ size: Int) {
        if size < model.count {
            model.removeSubrange(size...)
        } else {
            model += [UInt8](repeating: 0, count: size - model.count)
        }
    }

    private func readAndCompare(_ descriptor: Int32, offset: Int, length: Int, what: String) -> String? {
        var buffer = [UInt8](repeating: 0xEE, count: length)
        var total = 0
        while total < length {
            let n = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + total, length - total, off_t(offset + total)) }
            if n < 0 { return "\(what): errno \(errno)" }
            if n == 0 { break }
            total += n
        }
        let expectedCount = offset >= model.count ? 0 : min(offset + length, model.count) - offset
        if total != expectedCount {
            return "\(what) at \(offset) returned \(total) byte(s), the model has \(expectedCount) there (size \(model.count))"
        }
        if total == 0 || FsxRun.same(buffer, 0, model, offset, total) { return nil }
        if let difference = FsxRun.firstDifference(Array(buffer[..<total]), Array(model[offset..<offset + total]), base: offset) {
            return "\(what) at \(offset) length \(length): \(difference)"
        }
        return nil
    }

    private func mmapRead(_ start: Int, _ length: Int) -> String? {
        note("mmap read offset \(start) length \(length) (size \(model.count))")
        guard let map = mmap(nil, length, PROT_READ, MAP_SHARED, fd, off_t(start)), map != MAP_FAILED else {
            return "mmap PROT_READ: errno \(errno)"
        }
        defer { munmap(map, length) }
        let seen = Array(UnsafeRawBufferPointer(start: map, count: length))
        if FsxRun.same(seen, 0, model, start, length) { return nil }
        if let difference = FsxRun.firstDifference(seen, Array(model[start..<start + length]), base: start) {
            return "mmap read at \(start) length \(length): \(difference)"
        }
        return nil
    }

    private func mmapWrite(_ start: Int, _ length: Int) -> String? {
        let inner = random.below(length)
        let data = bytes(1 + random.below(length - inner))
        let sync = random.chance(80)
        note("mmap write offset \(start + inner) length \(data.count) (mapped \(start)+\(length), size \(model.count))"
             + (sync ? ", msync" : ", no msync"))
        guard let map = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(start)), map != MAP_FAILED else {
            return "mmap PROT_WRITE: errno \(errno)"
        }
        data.withUnsafeBytes { (map + inner).copyMemory(from: $0.baseAddress!, byteCount: data.count) }
        if sync && msync(map, length, MS_SYNC) != 0 {
            munmap(map, length)
            return "msync: errno \(errno)"
        }
        munmap(map, length)
        apply(data, at: start + inner)
        return nil
    }

    /// The whole file through a fresh descriptor and through the open one, and its size.
    func compareAll(_ op: Op) throws -> String? {
        note("compare the whole file (size \(model.count))")
        let content = try FsxRun.contents(of: path)
        if let difference = FsxRun.firstDifference(content, model) { return "whole file: \(difference)" }
        if fd >= 0 {
            var st = Glibc.stat()
            guard fstat(fd, &st) == 0 else { return "fstat: errno \(errno)" }
            guard Int(st.st_size) == model.count else { return "fstat size \(st.st_size), model \(model.count)" }
            return readAndCompare(fd, offset: 0, length: model.count + 1, what: "read of the whole file through the open descriptor")
        }
        return nil
    }

    static func contents(of path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { Glibc.close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 { throw TestFailure("read \(path): errno \(errno)") }
            if n == 0 { return data }
            data.append(contentsOf: chunk[..<n])
        }
    }

    /// Whether `count` bytes of `a` from `i` equal those of `b` from `j` (memcmp: a loop over
    /// bytes is slow in a debug build).
    static func same(_ a: [UInt8], _ i: Int, _ b: [UInt8], _ j: Int, _ count: Int) -> Bool {
        a.withUnsafeBytes { x in b.withUnsafeBytes { y in memcmp(x.baseAddress! + i, y.baseAddress! + j, count) == 0 } }
    }

    /// Where two contents first differ (offsets shifted by `base`), with a few bytes of each.
    static func firstDifference(_ seen: [UInt8], _ expected: [UInt8], base: Int = 0) -> String? {
        if seen.count == expected.count && (seen.isEmpty || same(seen, 0, expected, 0, seen.count)) { return nil }
        let common = min(seen.count, expected.count)
        var i = 0
        while i < common && seen[i] == expected[i] { i += 1 }
        if i == common && seen.count == expected.count { return nil }
        func show(_ bytes: [UInt8]) -> String {
            bytes[min(i, bytes.count)..<min(i + 16, bytes.count)].map { String(format: "%02x", $0) }.joined(separator: " ")
        }
        var text = "first difference at offset \(base + i)"
        if seen.count != expected.count { text += " (length \(seen.count), expected \(expected.count))" }
        return text + ": read [\(show(seen))], expected [\(show(expected))]"
    }
}
