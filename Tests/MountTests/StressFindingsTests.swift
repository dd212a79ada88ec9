import Foundation
import XCTest

/// Minimal reproductions of what StressTests found, one per daemon bug.
final class StressFindingsTests: XCTestCase {
    var fx: MountFixture!
    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// (Failed before main's 27a048a; passes since.)
    /// A copied-up file replaced on disk by a symlink, then `.invalidate`: docs/MERGED-VIEW.md promises
    /// that files already open keep reading what they opened, and that a name leading to another
    /// kind of entry gets a new node. After a copy-up the node's file identity is unknown (0),
    /// and NodeTable.remember/refresh then keep the node for the symlink: the kernel sees the
    /// inode change type, marks it bad, and the open descriptor answers EIO. (Without the
    /// copy-up, with the file only in the substitution, the same steps work.)
    func testCopiedUpFileReplacedBySymlinkKeepsItsOpenDescriptor() throws {
        try Disk.write(fx.inMain("f"), "main")
        try fx.start()
        let writer = open(fx.inMount("f"), O_WRONLY)  // copies f up
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        close(writer)
        let reader = open(fx.inMount("f"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0, "errno \(errno)")
        defer { close(reader) }
        XCTAssertEqual(unlink(fx.inSubstitution("f")), 0)
        try Disk.symlink(fx.inSubstitution("f"), to: "elsewhere")
        try Disk.write(fx.inMount(".invalidate"), "\n")

        XCTAssertEqual(Disk.readLink(fx.inMount("f")), "elsewhere")
        var st = stat()
        XCTAssertEqual(fstat(reader, &st) == 0 ? 0 : errno, 0, "fstat of the descriptor opened before")
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = pread(reader, &buffer, buffer.count, 0)
        XCTAssertEqual(count, 4, "read of the descriptor opened before: errno \(errno)")
    }

    /// Eight processes making files, symlinks and directories under three names at three
    /// levels (an empty main bundle: no copy-up involved) and renaming and exchanging them over
    /// each other while they stat, open, read and list them. A reply about a node that carries
    /// another file type than the kernel's inode has makes the kernel fail the call or mark the
    /// inode bad (EIO without a warning from the daemon: the EIO is the kernel's). Two causes,
    /// both fixed: create and mkdir replied with attributes of the name resolved again by path,
    /// which a concurrent RENAME_EXCHANGE of an ancestor had made lead into another directory
    /// (the kernel fails a create whose reply is not a regular file, a mkdir whose reply is not
    /// a directory); and open opened by path whatever entry had taken the file's name (a
    /// directory opens fine), whose fstat then gave the kernel a directory's attributes for a
    /// file's inode. Before the fixes: 1 to 12 EIOs in every 5 s run, mostly create and mkdir.
    func testRacingOverFewNamesGivesNoEIO() throws {
        try fx.start()
        let failures = try race(["--letters", "abc", "--max-depth", "3"], failing: ["EIO"])
        let warnings = fx.log.split(separator: "\n").filter { $0.contains("failed") }
        XCTAssertEqual(failures, [], "calls that failed with EIO; the daemon's warnings: \(warnings)")
    }

    /// Eight processes creating (open, write, close), renaming, unlinking and stating two names
    /// at the root. lstat fails with EBADF: getattr of a node whose name was removed answers
    /// from one of its open files (Overlay.attributes(of:) through
    /// NodeTable.openFileOfDetached/openFile), but the descriptor is taken from the table
    /// under its lock and used (fstat) after the lock is released, while the release of that
    /// file closes it. Worse than EBADF: the number may already belong to another file opened
    /// meanwhile, whose attributes (of another type, even) are then sent for this node. Before
    /// a fix: EBADF in 5 of 6 runs of 5 s, hence 10 s here.
    func testStatOfARemovedFileBeingClosedGivesNoEBADF() throws {
        try fx.start()
        let failures = try race(["--letters", "ab", "--max-depth", "1", "--ops", "create,rename,stat,unlink"],
                                failing: ["EBADF", "EIO"], seconds: 10)
        XCTAssertEqual(failures, [], "calls that failed with EBADF or EIO")
    }

    /// Runs 8 workers with `arguments` for STRESS_SECONDS (default `seconds`) and returns their
    /// UNEXPECTED lines that end with one of `failing`.
    private func race(_ arguments: [String], failing: Set<String>, seconds: Double = 5) throws -> [String] {
        let seconds = ProcessInfo.processInfo.environment["STRESS_SECONDS"].flatMap { Double($0) } ?? seconds
        var workers: [(pid: pid_t, output: String)] = []
        var reaped: Set<pid_t> = []
        // a reaped child's pid may be another process's by now: only those not reaped are signalled
        defer { for worker in workers where !reaped.contains(worker.pid) { kill(worker.pid, SIGKILL); _ = Spawn.wait(worker.pid, seconds: 10) } }
        for i in 0..<8 {
            let output = fx.root + "/worker-\(i).out"
            let pid = try Spawn.start(StressTests.workerBinary,
                                      ["--seed", "\(1000 + i)", "--seconds", "\(seconds)", "--dir", fx.mountpoint,
                                       "--invalidate-percent", "0"] + arguments,
                                      stderrPath: output, stdoutPath: output)
            workers.append((pid, output))
        }
        for worker in workers {
            let status = Spawn.wait(worker.pid, seconds: seconds + 60)
            XCTAssertNotNil(status, "a worker hangs")
            if status != nil { reaped.insert(worker.pid) }
        }
        let lines = workers.flatMap { worker in
            ((try? String(contentsOfFile: worker.output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        print("\(name): " + lines.filter { $0.hasPrefix("steps") }.joined(separator: "; "))
        return lines.filter { line in line.hasPrefix("UNEXPECTED") && failing.contains(String(line.split(separator: " ").last ?? "")) }
    }
}
