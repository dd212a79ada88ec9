import Foundation
import XCTest

/// Set-user-ID and set-group-ID bits cleared by writes, truncations and changes of owner.
///
/// The daemon asks the kernel for FUSE_HANDLE_KILLPRIV_V2, so the kernel stops asking for
/// `security.capability` before every write and leaves the clearing to the daemon: a SETATTR
/// that changes nothing before a write (also one that passes through, which the daemon never
/// sees), and flags on truncating SETATTRs, truncating OPENs and WRITEs through the daemon.
final class SetIDBitsTests: XCTestCase {
    /// Whose bits, and how they start: the kind of file each operation is tried on.
    private static let kinds: [(name: String, mode: mode_t, gid: gid_t)] = [
        ("gx", 0o6777, 0),          // both bits, group-executable: a writer clears both
        ("other", 0o2666, 0),       // set-group-ID, not group-executable, group root: cleared
        ("member", 0o2666, 65534),  // the same in the writer's own group: kept
    ]
    /// Operations as user nobody (no CAP_FSETID); then root's, which keeps the bits on a write.
    private static let userOperations = ["append": "echo more >> F", "truncate": "truncate -s 2 F", "emptied": ": > F"]
    private static let rootOperations = ["rootappend": "echo more >> F", "chown": "chown 65534 F"]

    func testWritesTruncationsAndChownClearTheBitsAsOnKernelOverlayfs() throws {
        try compareWithKernelOverlayfs(environment: [])
    }

    /// Without passthrough, writes reach the daemon with the kernel's flag instead.
    func testWithoutPassthroughTheDaemonClearsTheBitsOnWriteRequests() throws {
        try compareWithKernelOverlayfs(environment: ["PROXYBUNDLE_NO_PASSTHROUGH=1"])
    }

    /// Many writes to one file ask for its `security.capability` once, not once per write.
    func testAWriteLoopAsksForSecurityCapabilityOnce() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try fx.start()
        XCTAssertEqual(try fx.stats()["setid_bits_cleared_by"], "daemon")
        let fd = open(fx.inMount("log.txt"), O_WRONLY | O_CREAT | O_APPEND, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertEqual(write(fd, "first\n", 6), 6)
        let before = try reads(fx)
        for _ in 0..<500 { XCTAssertEqual(write(fd, "line\n", 5), 5) }
        XCTAssertLessThanOrEqual(try reads(fx) - before, 1, "GETXATTR requests for 500 writes")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("log.txt")).count, 6 + 500 * 5)
    }

    private func reads(_ fx: MountFixture) throws -> Int { try fx.figure("extended_attribute_reads") }

    private func compareWithKernelOverlayfs(environment: [String]) throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        let names = try makeFiles(fx)
        let kernel = fx.root + "/kernel", kernelUpper = fx.root + "/kernel-upper"
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, kernelUpper])
        XCTAssertEqual(copy.status, 0, copy.error)
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(fx, at: kernel, upper: kernelUpper)
        fx.environment = environment
        try fx.start(["-o", "allow_other"])
        for root in [fx.mountpoint, kernel] {
            try run(Self.userOperations, on: names, in: root, asNobody: true)
            try run(Self.rootOperations, on: names, in: root, asNobody: false)
        }
        var cleared = 0
        for name in names {
            let mine = Disk.lstat(fx.inMount(name)).map { $0.st_mode & 0o7777 }
            let theirs = Disk.lstat(kernel + "/" + name).map { $0.st_mode & 0o7777 }
            XCTAssertEqual(mine.map { String($0, radix: 8) }, theirs.map { String($0, radix: 8) }, name)
            XCTAssertEqual(Disk.lstat(fx.inSubstitution(name)).map { $0.st_mode & 0o7777 }, mine, "\(name) in the substitution")
            if let theirs, theirs & (S_ISUID | S_ISGID) == 0 { cleared += 1 }
        }
        // the comparison covers both outcomes: bits cleared, and bits kept
        XCTAssertGreaterThan(cleared, 6)
        XCTAssertLessThan(cleared, names.count)
    }

    /// For each operation and kind, a file in the main bundle and one in the substitution.
    private func makeFiles(_ fx: MountFixture) throws -> [String] {
        var names: [String] = []
        for operation in Array(Self.userOperations.keys) + Array(Self.rootOperations.keys) {
            for kind in Self.kinds {
                for (layer, directory) in [("main", fx.main), ("patch", fx.substitution)] {
                    let name = "\(operation)-\(kind.name)-\(layer)"
                    let path = directory + "/" + name
                    try Disk.write(path, "data\n")
                    XCTAssertEqual(chown(path, 0, kind.gid), 0)
                    XCTAssertEqual(chmod(path, kind.mode), 0)  // after chown, which clears the bits
                    names.append(name)
                }
            }
        }
        return names.sorted()
    }

    private func run(_ operations: [String: String], on names: [String], in root: String, asNobody: Bool) throws {
        var commands: [String] = []
        for name in names {
            guard let operation = operations.first(where: { name.hasPrefix($0.key + "-") }) else { continue }
            commands.append(operation.value.replacingOccurrences(of: "F", with: "'\(root)/\(name)'"))
        }
        let shell = ["/bin/sh", "-c", commands.joined(separator: " && ")]
        let result = asNobody
            ? try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"] + shell, seconds: 20)
            : try Spawn.run(shell[0], Array(shell.dropFirst()), seconds: 20)
        XCTAssertEqual(result.status, 0, "\(root): \(result.error)")
    }
}
