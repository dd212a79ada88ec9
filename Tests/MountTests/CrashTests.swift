import CSyscalls
import Foundation
import XCTest

/// The daemon SIGKILLed at seeded random moments while a workload of plain syscalls runs
/// through the mount on its own thread; then `proxybundle unmount` clears the dead mount, the
/// layers are mounted again and what the mount shows is checked against every state the
/// workload could have reached:
/// - every byte whose fsync returned 0 is there;
/// - a visible file is the main bundle's original or a complete new version, never a partial
///   copy-up;
/// - no entry is lost: a renamed entry shows under its old or its new name (a materialized
///   directory under both at worst), a removed one is gone once unlink returned, and is
///   otherwise still there with its content;
/// - nothing temporary shows (no `.wh.` name), the work directory is empty after the remount,
///   and the main bundle is unchanged (checksummed before the first and after every kill).
///
/// CopyUpFailureTests kills once during a 512 MiB copy-up; here each scenario gets several kill
/// points, 0 to 300 ms into the workload (180 for the copy-ups, which take about that long). Environment: `CRASH_KILL_POINTS=N` (default 3 per
/// scenario), `CRASH_SEED=0x...` (default fixed; the delays are printed).
final class CrashTests: XCTestCase {
    var fx: MountFixture!
    private var initialMain = ""
    private var rng = OverlayScenario.Generator(seed: 0)

    static let environment = ProcessInfo.processInfo.environment
    static let killPoints = environment["CRASH_KILL_POINTS"].flatMap { Int($0) } ?? 3
    static let seed = environment["CRASH_SEED"].flatMap { RandomOperationsTests.parseSeeds($0).first } ?? 0xC0FF_EE00_0007

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        // each test its own stream, the same on every run
        rng = OverlayScenario.Generator(seed: name.utf8.reduce(CrashTests.seed) { ($0 ^ UInt64($1)) &* 0x100000001b3 })
    }

    override func tearDown() { fx?.tearDown() }

    // MARK: (a) many files written and fsync'd

    func testKillWhileWritingAndFsyncingManyFiles() throws {
        let appendable = 40
        for k in 0..<appendable { try Disk.write(fx.inMain("append/m\(k)"), String(repeating: "main \(k) ", count: 100)) }
        try Disk.write(fx.inMain("new/saved"), "the main bundle's version")  // replaced by atomic saves
        try runKillPoints(scenario: "fsync", steps: 100, setUp: {}) { journal in
            var appended = 0
            for step in 0..<100_000 {
                journal.begin(step)
                let error: Int32
                switch step % 5 {
                case 3 where appended < appendable:
                    error = Syscalls.appendAndSync(journal.mount + "/append/m\(appended)",
                                                   CrashTests.data(step, count: 3000))
                    appended += 1
                case 4:
                    error = Syscalls.saveAtomically(journal.mount + "/new/save.tmp-\(step)", journal.mount + "/new/saved",
                                                    CrashTests.data(step, count: 5000))
                default:
                    error = Syscalls.createAndSync(journal.mount + "/new/f-\(step)", CrashTests.data(step, count: 1 + step * 977 % 60_000))
                }
                if !journal.end(step, error) { return }
            }
        } check: { journal in
            let inProgress = journal.inProgress
            // the steps as the workload made them: which file each one wrote
            var appended = 0
            var savedVersions: [Int] = []
            var newFiles = Set<String>()
            for step in 0...max(journal.lastBegun, 0) where journal.lastBegun >= 0 {
                let done = journal.completed.contains(step)
                switch step % 5 {
                case 3 where appended < appendable:
                    let path = "append/m\(appended)"
                    appended += 1
                    let original = try XCTUnwrap(Probe.bytes(fx.inMain(path)))
                    let shown = try XCTUnwrap(Probe.bytes(fx.inMount(path)), "\(path) is lost")
                    let chunk = CrashTests.data(step, count: 3000)
                    if done {
                        XCTAssertEqual(shown, original + chunk, "\(path): an fsync'd append is incomplete")
                    } else {
                        XCTAssertTrue(shown.count >= original.count && Array(shown[..<original.count]) == original,
                                      "\(path): a partial copy-up shadows the original (\(shown.count) bytes)")
                        XCTAssertTrue(CrashTests.isPartial(Array(shown.dropFirst(original.count)), of: chunk), "\(path): foreign bytes")
                    }
                case 4:
                    savedVersions.append(step)
                    if done { XCTAssertEqual(Disk.lstatError(fx.inMount("new/save.tmp-\(step)")), ENOENT, "a renamed temporary file is back") }
                    else { newFiles.insert("save.tmp-\(step)") }
                default:
                    let name = "new/f-\(step)"
                    let expected = CrashTests.data(step, count: 1 + step * 977 % 60_000)
                    newFiles.insert("f-\(step)")
                    if done {
                        XCTAssertEqual(Probe.bytes(fx.inMount(name)), expected, "\(name): fsync'd data is lost")
                    } else if let shown = Probe.bytes(fx.inMount(name)) {
                        XCTAssertTrue(CrashTests.isPartial(shown, of: expected), "\(name): bytes that were never written")
                    }
                }
            }
            // the saved file (a main file at first) is a complete version: the last one whose
            // rename returned, or the one being saved, or main's while none returned
            let shown = try XCTUnwrap(Probe.bytes(fx.inMount("new/saved")), "new/saved is lost")
            let lastDone = savedVersions.last { journal.completed.contains($0) }
            var candidates = savedVersions.filter { $0 >= (lastDone ?? 0) }.map { CrashTests.data($0, count: 5000) }
            if lastDone == nil { candidates.append(Array("the main bundle's version".utf8)) }
            XCTAssertTrue(candidates.contains(shown), "new/saved is no complete version (\(shown.count) bytes)")
            newFiles.insert("saved")
            let listed = Set(try Disk.list(fx.inMount("new")))
            XCTAssertTrue(listed.isSubset(of: newFiles), "names nobody made: \(listed.subtracting(newFiles).sorted())")
            // main files not yet appended to show their original
            for k in appended..<appendable {
                XCTAssertEqual(Probe.bytes(fx.inMount("append/m\(k)")), Probe.bytes(fx.inMain("append/m\(k)")))
            }
            return "\(journal.completed.count) steps fsync'd, step \(inProgress.map(String.init) ?? "none") in progress"
        }
    }

    // MARK: (b) large copy-ups

    func testKillDuringLargeCopyUps() throws {
        // dense files take time to copy; the sparse one has a few data extents far apart
        try Filler.dense(fx.inMain("big/append"), mebibytes: 64, stamp: 1)
        try Filler.sparse(fx.inMain("big/truncate"), mebibytes: 256, every: 16, stamp: 2)
        try Filler.dense(fx.inMain("big/middle"), mebibytes: 96, stamp: 3)
        try Filler.dense(fx.inMain("big/chmod"), mebibytes: 32, stamp: 4)
        try Filler.dense(fx.inMain("big/rename"), mebibytes: 48, stamp: 5)
        let size = { (name: String) in Int(Disk.lstat(self.fx.inMain("big/" + name))?.st_size ?? 0) }
        let truncatedSize = size("truncate") - (5 << 20) - 3
        let middle = size("middle") / 2 + 12345
        try runKillPoints(scenario: "copy-up", steps: 5, setUp: {}) { journal in
            let m = journal.mount + "/big/"
            let steps: [() -> Int32] = [
                { Syscalls.appendAndSync(m + "append", Array("APPENDED".utf8)) },
                { truncate(m + "truncate", off_t(truncatedSize)) == 0 ? 0 : errno },
                { Syscalls.pwriteAndSync(m + "middle", Array("MIDDLE".utf8), at: middle) },
                { chmod(m + "chmod", 0o600) == 0 ? 0 : errno },
                { rename(m + "rename", m + "renamed") == 0 ? 0 : errno },
            ]
            for (step, body) in steps.enumerated() {
                journal.begin(step)
                if !journal.end(step, body()) { return }
            }
        } check: { journal in
            func shown(_ name: String) -> String { fx.inMount("big/" + name) }
            func original(_ name: String, _ length: Int? = nil) throws -> Bool {
                try Probe.samePrefix(shown(name), fx.inMain("big/" + name), length: length ?? size(name))
            }
            func tail(_ path: String, from offset: Int, count: Int) -> [UInt8] {
                let fd = open(path, O_RDONLY)
                defer { close(fd) }
                var buffer = [UInt8](repeating: 0, count: count)
                let n = pread(fd, &buffer, count, off_t(offset))
                return Array(buffer[..<max(n, 0)])
            }
            var outcomes: [String] = []
            // append: the original, or the original and the whole appended text
            let appendSize = Int(Disk.lstat(shown("append"))?.st_size ?? -1)
            XCTAssertTrue(try original("append"), "append: the main bundle's bytes are not all there")
            if appendSize == size("append") {
                XCTAssertFalse(journal.completed.contains(0), "append: an fsync'd append is lost")
                outcomes.append("append original")
            } else {
                XCTAssertEqual(appendSize, size("append") + 8)
                XCTAssertEqual(tail(shown("append"), from: size("append"), count: 16), Array("APPENDED".utf8))
                outcomes.append("append new")
            }
            // truncate: the original or the truncated copy, whole
            let truncateSize = Int(Disk.lstat(shown("truncate"))?.st_size ?? -1)
            XCTAssertTrue([size("truncate"), truncatedSize].contains(truncateSize), "truncate: size \(truncateSize)")
            XCTAssertTrue(try original("truncate", min(truncateSize, truncatedSize)), "truncate: content differs")
            if journal.completed.contains(1) { XCTAssertEqual(truncateSize, truncatedSize, "truncate: a truncate that returned is lost") }
            outcomes.append(truncateSize == truncatedSize ? "truncate new" : "truncate original")
            // middle: original bytes around, and the six bytes either original or new
            XCTAssertEqual(Int(Disk.lstat(shown("middle"))?.st_size ?? -1), size("middle"))
            XCTAssertTrue(try original("middle", middle), "middle: the bytes before the write differ")
            let written = tail(shown("middle"), from: middle, count: 6)
            let before = tail(fx.inMain("big/middle"), from: middle, count: 6)
            XCTAssertTrue(written == before || written == Array("MIDDLE".utf8), "middle: \(written)")
            if journal.completed.contains(2) { XCTAssertEqual(written, Array("MIDDLE".utf8), "middle: an fsync'd write is lost") }
            XCTAssertEqual(tail(shown("middle"), from: middle + 6, count: 4096), tail(fx.inMain("big/middle"), from: middle + 6, count: 4096))
            outcomes.append(written == before ? "middle original" : "middle new")
            // chmod: content whole whatever the mode
            let mode = Disk.lstat(shown("chmod")).map { $0.st_mode & 0o777 }
            XCTAssertTrue(mode == 0o644 || mode == 0o600, "chmod: mode \(String(describing: mode))")
            if journal.completed.contains(3) { XCTAssertEqual(mode, 0o600, "chmod: a chmod that returned is lost") }
            XCTAssertEqual(Int(Disk.lstat(shown("chmod"))?.st_size ?? -1), size("chmod"))
            XCTAssertTrue(try original("chmod"), "chmod: content differs")
            // rename: under one of the two names, whole
            let old = Disk.lstat(shown("rename")) != nil, new = Disk.lstat(shown("renamed")) != nil
            XCTAssertTrue(old || new, "rename: the file is under neither name")
            XCTAssertFalse(old && new, "rename: a file shows under both names")
            if journal.completed.contains(4) { XCTAssertTrue(new && !old, "rename: a rename that returned is undone") }
            for name in [old ? "rename" : nil, new ? "renamed" : nil].compactMap({ $0 }) {
                XCTAssertEqual(Int(Disk.lstat(shown(name))?.st_size ?? -1), size("rename"))
                XCTAssertTrue(try Probe.samePrefix(shown(name), fx.inMain("big/rename"), length: size("rename")), "\(name): content differs")
            }
            outcomes.append(new ? "rename new" : "rename original")
            XCTAssertEqual(Set(try Disk.list(fx.inMount("big"))),
                           ["append", "truncate", "middle", "chmod", new ? "renamed" : "rename"])
            return outcomes.joined(separator: ", ")
        }
    }

    // MARK: (c) materializing directory renames

    func testKillWhileRenamingDirectoriesWithMainContent() throws {
        let trees = 6
        for t in 0..<trees {
            for f in 0..<120 { try Disk.write(fx.inMain("trees/t\(t)/sub\(f % 3)/f\(f)"), "main \(t)/\(f) " + String(repeating: "x", count: f * 37)) }
            try Disk.write(fx.inMain("trees/t\(t)/gone"), "hidden by a whiteout")
            try Disk.write(fx.inMain("trees/t\(t)/shadowed"), "main's")
        }
        try Disk.mkdir(fx.inMain("moved"))
        let substitutionSetUp = { [fx = fx!] in
            for t in 0..<trees {
                try Disk.whiteout(fx.inSubstitution("trees/t\(t)"), "gone")
                try Disk.write(fx.inSubstitution("trees/t\(t)/shadowed"), "patch's \(t)")
                try Disk.write(fx.inSubstitution("trees/t\(t)/sub1/patch-only"), "patch only \(t)")
            }
        }
        var expected: [[String: String]] = []
        try substitutionSetUp()
        try fx.start()
        for t in 0..<trees { expected.append(try Probe.describe(fx.inMount("trees/t\(t)"))) }
        fx.stop()
        XCTAssertEqual(expected[0]["shadowed"], try Probe.describe(fx.inSubstitution("trees/t0"))["shadowed"])
        XCTAssertNil(expected[0]["gone"])
        try runKillPoints(scenario: "materialize", steps: trees, setUp: substitutionSetUp) { journal in
            for t in 0..<trees {
                journal.begin(t)
                let error = rename(journal.mount + "/trees/t\(t)", journal.mount + "/moved/t\(t)") == 0 ? 0 : errno
                if !journal.end(t, error) { return }
            }
        } check: { journal in
            var both = 0
            for t in 0..<trees {
                let old = Disk.lstat(fx.inMount("trees/t\(t)")) != nil, new = Disk.lstat(fx.inMount("moved/t\(t)")) != nil
                XCTAssertTrue(old || new, "t\(t) is under neither name")
                if journal.completed.contains(t) { XCTAssertTrue(new && !old, "t\(t): a rename that returned is undone") }
                if journal.lastBegun < t { XCTAssertTrue(old && !new, "t\(t) moved without being renamed") }
                if old && new { both += 1 }
                for path in [old ? "trees/t\(t)" : nil, new ? "moved/t\(t)" : nil].compactMap({ $0 }) {
                    XCTAssertEqual(Probe.differences(try Probe.describe(fx.inMount(path)), expected[t]), [], "\(path) is not whole (shown | expected)")
                }
            }
            let names = Set((0..<trees).map { "t\($0)" })
            XCTAssertTrue(Set(try Disk.list(fx.inMount("trees"))).isSubset(of: names))
            XCTAssertTrue(Set(try Disk.list(fx.inMount("moved"))).isSubset(of: names))
            return "\(journal.completed.count) of \(trees) renamed, \(both) under both names"
        }
    }

    // MARK: (d) whiteouts

    func testKillWhileRemovingMainFilesAndTrees() throws {
        let files = 1500
        for i in 0..<files { try Disk.write(fx.inMain("del/f\(i)"), "file \(i)") }
        for a in 0..<4 {
            for b in 0..<4 {
                for c in 0..<25 { try Disk.write(fx.inMain("tree/a\(a)/b\(b)/c\(c)"), "\(a)/\(b)/\(c)") }
            }
        }
        try Disk.write(fx.inSubstitution("tree/a1/b1/patch-only"), "patch")
        let substitutionSetUp = { [fx = fx!] in try Disk.write(fx.inSubstitution("tree/a1/b1/patch-only"), "patch") }
        try fx.start()
        let before = try Probe.describe(fx.mountpoint)
        fx.stop()
        // the removal order, as rm -rf does it: depth first, children before their directory
        var treeOrder: [String] = []
        for a in 0..<4 {
            for b in 0..<4 {
                treeOrder += (0..<25).map { "tree/a\(a)/b\(b)/c\($0)" }
                if a == 1 && b == 1 { treeOrder.append("tree/a1/b1/patch-only") }
                treeOrder.append("tree/a\(a)/b\(b)")
            }
            treeOrder.append("tree/a\(a)")
        }
        treeOrder.append("tree")
        let order = (0..<files).map { "del/f\($0)" } + treeOrder
        try runKillPoints(scenario: "whiteouts", steps: order.count, setUp: substitutionSetUp) { journal in
            for (step, path) in order.enumerated() {
                journal.begin(step)
                let full = journal.mount + "/" + path
                let isDirectory = path.hasPrefix("tree") && !path.contains("/c") && !path.hasSuffix("patch-only")
                let error = (isDirectory ? rmdir(full) : unlink(full)) == 0 ? 0 : errno
                if !journal.end(step, error) { return }
            }
        } check: { journal in
            let now = try Probe.describe(fx.mountpoint)
            let removed = Set(journal.completed.map { order[$0] })
            let maybe = Set(journal.inProgress.map { [order[$0]] } ?? [])
            for (path, description) in before where path.hasPrefix("del/") || path.hasPrefix("tree") {
                if removed.contains(path) {
                    XCTAssertNil(now[path], "\(path) is back after its removal returned")
                } else if !maybe.contains(path) {
                    XCTAssertEqual(now[path], description, "\(path) is lost or changed")
                } else if let shown = now[path] {
                    XCTAssertEqual(shown, description, "\(path) changed")
                }
            }
            XCTAssertEqual(Set(now.keys).subtracting(before.keys), [], "entries that were never there")
            return "\(removed.count) of \(order.count) removals returned"
        }
    }

    // MARK: the kill

    /// Runs the scenario's kill points: each mounts a fresh copy of the substitution (emptied,
    /// then `setUp`), starts `workload` on a thread, SIGKILLs the daemon once a seeded step of
    /// the first `steps` has begun and the workload waits for the daemon's answer (a point in
    /// the work, not a time, so a fast or busy machine kills at the same places), waits for
    /// the workload to end, clears the dead mount with
    /// `proxybundle unmount`, mounts again and runs the common checks and `check`. A kill that
    /// cut the workload short (a call failed after it) landed; at least one must.
    private func runKillPoints(scenario: String, steps: Int, setUp: () throws -> Void,
                               _ workload: @escaping @Sendable (Journal) -> Void,
                               check: (Journal) throws -> String) throws {
        let mainBefore = try TreeChecksum.of(fx.main)
        var landed = 0
        for point in 0..<CrashTests.killPoints {
            try Probe.empty(fx.substitution)
            try setUp()
            let step = rng.below(steps)
            try fx.start()
            let journal = Journal(mount: fx.mountpoint)
            let thread = Thread { workload(journal); journal.finish() }
            thread.start()
            try eventually("\(scenario): step \(step) waits for the daemon", within: 60) {
                journal.isFinished || journal.lastBegun > step
                    || journal.lastBegun == step && journal.waitsForTheDaemon
            }
            journal.markKilled()
            kill(fx.daemon, SIGKILL)
            XCTAssertTrue(journal.waitUntilFinished(seconds: 60), "\(scenario): the workload hangs after the kill")
            XCTAssertEqual(journal.unexpected, [], "\(scenario): errors before the kill")
            let unmount = try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint], seconds: 30)
            XCTAssertEqual(unmount.status, 0, "proxybundle unmount of the dead mount: \(unmount.output)\(unmount.error)")
            XCTAssertFalse(fx.isMounted, "the dead mount is still there")
            fx.stop()  // reaps the killed daemon
            XCTAssertEqual(try TreeChecksum.of(fx.main), mainBefore, "\(scenario): the main bundle was modified")

            try fx.start()
            XCTAssertNil(Probe.workEntries(fx), "\(scenario): the remount removes the work directory with what the crash left")
            let tree = try Probe.walk(fx.mountpoint)
            XCTAssertEqual(Probe.whiteoutNames(in: tree), [], "\(scenario): temporary or whiteout names are visible")
            let summary = try check(journal)
            let cut = journal.ending != nil
            if cut { landed += 1 }
            print("crash \(scenario) kill point \(point) (seed 0x\(String(CrashTests.seed, radix: 16))): at step \(step),"
                  + " \(cut ? "during" : "after") the workload, ended by \(journal.ending.map { String(cString: strerror($0)) } ?? "nothing");"
                  + " \(summary)")
            fx.stop()
        }
        print("crash \(scenario): \(landed) of \(CrashTests.killPoints) kills landed during the workload")
        XCTAssertGreaterThan(landed, 0, "\(scenario): no kill of \(CrashTests.killPoints) landed during the workload")
    }

    /// Content of step `step`'s write: no zero byte, so a hole left by a lost page shows.
    static func data(_ step: Int, count: Int) -> [UInt8] {
        (0..<count).map { (i: Int) -> UInt8 in
            let mixed: Int = i &* 13 &+ step &* 7 &+ (i >> 8)
            return UInt8(1 + mixed % 255)
        }
    }

    /// Whether `shown` could be what is left of writing `expected` without an fsync: no longer,
    /// and each byte either written or still a hole.
    static func isPartial(_ shown: [UInt8], of expected: [UInt8]) -> Bool {
        shown.count <= expected.count && zip(shown, expected).allSatisfy { $0 == $1 || $0 == 0 }
    }
}

/// What a workload thread did: the steps begun and completed, its first error after the kill,
/// and any error before it (a failure).
final class Journal: @unchecked Sendable {
    let mount: String
    private let lock = NSCondition()
    private var begun = -1
    private var done = Set<Int>()
    private var killed = false
    private var finished = false
    private var endingError: Int32?
    private var errors: [String] = []

    init(mount: String) { self.mount = mount }

    /// The workload thread's id (/proc/thread-self names it), once it began a step.
    private var thread: String?

    func begin(_ step: Int) {
        let thread = self.thread ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self"))
        lock.withLock {
            begun = step
            self.thread = thread
        }
    }

    /// Whether the workload thread sleeps waiting for a FUSE request's answer.
    var waitsForTheDaemon: Bool {
        guard let thread = lock.withLock({ self.thread }) else { return false }
        return (try? String(contentsOfFile: "/proc/\(thread)/wchan", encoding: .utf8)) == "request_wait_answer"
    }

    var isFinished: Bool { lock.withLock { finished } }

    /// Records the step's result (0 or an errno); false when the workload must stop.
    func end(_ step: Int, _ error: Int32) -> Bool {
        lock.withLock {
            if error == 0 {
                done.insert(step)
                return true
            }
            if killed {
                if endingError == nil { endingError = error }
            } else {
                errors.append("step \(step): \(String(cString: strerror(error)))")
            }
            return false
        }
    }

    /// Marks the kill as sent: errors from now on end the workload.
    func markKilled() { lock.withLock { killed = true } }

    func finish() { lock.withLock { finished = true; lock.broadcast() } }

    func waitUntilFinished(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        return lock.withLock {
            while !finished { if !lock.wait(until: deadline) { return finished } }
            return true
        }
    }

    var completed: Set<Int> { lock.withLock { done } }
    var lastBegun: Int { lock.withLock { begun } }
    var inProgress: Int? { lock.withLock { begun >= 0 && !done.contains(begun) ? begun : nil } }
    var ending: Int32? { lock.withLock { endingError } }
    var unexpected: [String] { lock.withLock { errors } }
}

/// The workloads' system calls, each answering 0 or the errno of the first call that failed.
enum Syscalls {
    static func createAndSync(_ path: String, _ data: [UInt8]) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return writeAll(fd, data, at: nil) ?? (fsync(fd) == 0 ? 0 : errno)
    }

    static func appendAndSync(_ path: String, _ data: [UInt8]) -> Int32 {
        let fd = open(path, O_WRONLY | O_APPEND)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return writeAll(fd, data, at: nil) ?? (fsync(fd) == 0 ? 0 : errno)
    }

    static func pwriteAndSync(_ path: String, _ data: [UInt8], at offset: Int) -> Int32 {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return writeAll(fd, data, at: offset) ?? (fdatasync(fd) == 0 ? 0 : errno)
    }

    /// The editor's save: a temporary file written and fsync'd, renamed over the target.
    static func saveAtomically(_ temporary: String, _ target: String, _ data: [UInt8]) -> Int32 {
        let error = createAndSync(temporary, data)
        if error != 0 { return error }
        return rename(temporary, target) == 0 ? 0 : errno
    }

    private static func writeAll(_ fd: Int32, _ data: [UInt8], at offset: Int?) -> Int32? {
        var done = 0
        while done < data.count {
            let n = data.withUnsafeBytes { raw in
                offset.map { pwrite(fd, raw.baseAddress! + done, data.count - done, off_t($0 + done)) }
                    ?? write(fd, raw.baseAddress! + done, data.count - done)
            }
            if n < 0 { return errno }
            done += n
        }
        return nil
    }
}

/// Big main-bundle files made quickly: 1 MiB blocks, each 4 KiB page stamped with the file's
/// stamp, its block and page, so a misplaced page shows.
enum Filler {
    static func block(_ index: Int, stamp: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: UInt8(truncatingIfNeeded: 0x41 + stamp), count: 1 << 20)
        buffer.withUnsafeMutableBytes { raw in
            for page in 0..<256 {
                raw.storeBytes(of: UInt64(stamp << 40 | index << 8 | page) | 0x8080_0000_0000_0000,
                               toByteOffset: page * 4096, as: UInt64.self)
            }
        }
        return buffer
    }

    static func dense(_ path: String, mebibytes: Int, stamp: Int) throws {
        try write(path, size: mebibytes << 20, blocks: Array(0..<mebibytes), stamp: stamp)
    }

    /// `mebibytes` long, with data in one block of every `every`.
    static func sparse(_ path: String, mebibytes: Int, every: Int, stamp: Int) throws {
        try write(path, size: mebibytes << 20, blocks: Array(stride(from: 0, to: mebibytes, by: every)), stamp: stamp)
    }

    private static func write(_ path: String, size: Int, blocks: [Int], stamp: Int) throws {
        try Disk.makeParent(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw TestFailure("create \(path): errno \(errno)") }
        defer { close(fd) }
        for index in blocks {
            let data = block(index, stamp: stamp)
            guard pwrite(fd, data, data.count, off_t(index << 20)) == data.count else { throw TestFailure("write \(path): errno \(errno)") }
        }
        guard ftruncate(fd, off_t(size)) == 0 else { throw TestFailure("truncate \(path): errno \(errno)") }
    }
}
