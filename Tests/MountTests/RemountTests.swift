import Foundation
import ProxyBundleCore
import XCTest

/// Remounting a live mount read-only and back, and with other cache timeouts: through
/// mount(8) (`mount -o remount,ro`, which runs the helper) and `proxybundle remount`, compared
/// with kernel overlayfs remounted the same way.
final class RemountTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        try Disk.write(fx.inMain("file"), "main")
        try Disk.mkdir(fx.inMain("d"))
        try Disk.write(fx.inSubstitution("own"), "own")
    }

    override func tearDown() {
        if let fx, fx.isRunning { kill(fx.daemon, SIGCONT) }
        fx?.tearDown()
    }

    private func mountCommand(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/bin/mount", arguments, seconds: 60)
    }

    /// The per-mount options of the mount at `path` (`ro` or `rw` first).
    private func kernelOptions(_ path: String) -> [String] {
        MountTable.current().mount(at: path)?.options ?? []
    }

    // MARK: read-only and back

    /// `mount -o remount,ro` runs the helper (mount.fuse3 runs `proxybundle MAIN MNT -o
    /// ro,...,remount,...`); before, it failed with "unknown mount option 'remount'".
    func testMountRemountReadOnlyAndBackThroughTheHelper() throws {
        let helper = try HelperInstall()
        defer { helper.remove() }
        try fx.start()
        let ro = try mountCommand(["-o", "remount,ro", fx.mountpoint])
        XCTAssertEqual(ro.status, 0, ro.error)
        try checkReadOnly(fx.mountpoint)
        let rw = try mountCommand(["-o", "remount,rw", fx.mountpoint])
        XCTAssertEqual(rw.status, 0, rw.error)
        try checkWritable(fx.mountpoint)
    }

    func testRemountCommandReadOnlyAndBack() throws {
        try fx.start()
        let ro = try proxybundle(["remount", fx.mountpoint, "-o", "ro"])
        XCTAssertEqual(ro.status, 0, ro.error)
        try checkReadOnly(fx.mountpoint)
        let status = try proxybundle(["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("read_only: yes"), status.output)
        // commands still reach the daemon (through a writable clone of the mount)
        let invalidate = try proxybundle(["invalidate", fx.mountpoint])
        XCTAssertEqual(invalidate.status, 0, invalidate.error)
        let rw = try proxybundle(["remount", fx.mountpoint, "-o", "rw"])
        XCTAssertEqual(rw.status, 0, rw.error)
        try checkWritable(fx.mountpoint)
        XCTAssertEqual(try fx.stats()["read_only"], "no")
    }

    /// A mount made with `-o ro` (whose kernel flag stays writable, so that anyone may write
    /// `.invalidate`) is made writable by `remount -o rw`, not by mount(8) passing its `rw`.
    func testMountedReadOnlyIsMadeWritableOnlyWhenAsked() throws {
        let helper = try HelperInstall()
        defer { helper.remove() }
        try fx.start(["-o", "ro"])
        let timeouts = try mountCommand(["-o", "remount,entry_timeout=5", fx.mountpoint])
        XCTAssertEqual(timeouts.status, 0, timeouts.error)
        XCTAssertEqual(try fx.stats()["read_only"], "yes")
        XCTAssertEqual(try fx.stats()["entry_timeout"], "5")
        XCTAssertEqual(Probe.changes(in: fx.mountpoint)["create"], EROFS)
        let rw = try proxybundle(["remount", fx.mountpoint, "-o", "rw"])
        XCTAssertEqual(rw.status, 0, rw.error)
        try checkWritable(fx.mountpoint)
    }

    /// Every change answers EROFS, nothing lands in the substitution, reads work.
    private func checkReadOnly(_ mountpoint: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(kernelOptions(mountpoint).first, "ro", "the kernel's flag of the mount", file: file, line: line)
        XCTAssertEqual(try fx.stats()["read_only"], "yes", file: file, line: line)
        let before = try TreeChecksum.of(fx.substitution)
        let results = Probe.changes(in: mountpoint)
        for (change, error) in results.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(error, EROFS, "\(change) on a read-only remount", file: file, line: line)
        }
        XCTAssertEqual(try TreeChecksum.of(fx.substitution), before, "nothing lands in the substitution", file: file, line: line)
        XCTAssertEqual(try Disk.read(mountpoint + "/file"), "main", file: file, line: line)
        XCTAssertEqual(try Disk.read(mountpoint + "/own"), "own", file: file, line: line)
        XCTAssertEqual(try Disk.list(mountpoint).sorted(), ["d", "file", "own"], file: file, line: line)
    }

    private func checkWritable(_ mountpoint: String, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(kernelOptions(mountpoint).first, "rw", file: file, line: line)
        XCTAssertEqual(try fx.stats()["read_only"], "no", file: file, line: line)
        try Disk.write(mountpoint + "/again", "written")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("again")), "written", file: file, line: line)
        XCTAssertEqual(mkdir(mountpoint + "/newdir", 0o755), 0, file: file, line: line)
        XCTAssertEqual(unlink(mountpoint + "/file"), 0, file: file, line: line)
    }

    // MARK: kernel overlayfs

    /// Kernel overlayfs of the same layers, remounted read-only by mount(8): the same changes
    /// fail the same way; a file open for writing makes both remounts fail (the mount stays
    /// writable, the file too); both are writable again after remount,rw.
    func testReadOnlyRemountMatchesKernelOverlayfs() throws {
        let helper = try HelperInstall()
        defer { helper.remove() }
        try fx.start()
        let kernel = fx.root + "/kernel"
        let upper = fx.root + "/kernel-upper"
        try Disk.mkdir(upper)
        try Disk.write(upper + "/own", "own")
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(lowers: [fx.main], at: kernel, upper: upper)
        for mountpoint in [kernel, fx.mountpoint] {
            let open = Glibc.open(mountpoint + "/own", O_WRONLY | O_APPEND)
            XCTAssertGreaterThanOrEqual(open, 0)
            let busy = try mountCommand(["-o", "remount,ro", mountpoint])
            XCTAssertNotEqual(busy.status, 0, "\(mountpoint): remount,ro with a file open for writing")
            XCTAssertEqual(kernelOptions(mountpoint).first, "rw", mountpoint)
            XCTAssertEqual(write(open, "+", 1), 1, "\(mountpoint): the open file stays writable")
            close(open)
            let ro = try mountCommand(["-o", "remount,ro", mountpoint])
            XCTAssertEqual(ro.status, 0, "\(mountpoint): \(ro.error)")
        }
        XCTAssertEqual(try fx.stats()["read_only"], "yes")
        let expected = Probe.changes(in: kernel)
        XCTAssertEqual(Set(expected.values), [EROFS], "kernel overlayfs: \(expected)")
        XCTAssertEqual(Probe.changes(in: fx.mountpoint), expected)
        XCTAssertEqual(try Disk.read(kernel + "/own"), "own+")
        XCTAssertEqual(try Disk.read(fx.inMount("own")), "own+")
        for mountpoint in [kernel, fx.mountpoint] {
            let rw = try mountCommand(["-o", "remount,rw", mountpoint])
            XCTAssertEqual(rw.status, 0, "\(mountpoint): \(rw.error)")
            try Disk.write(mountpoint + "/after", "x")
            XCTAssertEqual(try Disk.read(mountpoint + "/after"), "x")
        }
        XCTAssertEqual(try Disk.read(fx.inSubstitution("after")), "x")
    }

    // MARK: cache timeouts

    /// With entry and attribute timeouts of 0 every stat asks the daemon (a lookup, counted in
    /// `.stats`); back at a day, none does.
    func testTimeoutChangeTakesEffect() throws {
        try fx.start()
        func lookups(statting count: Int) throws -> Int {
            let before = try fx.stats()
            var st = stat()
            for _ in 0..<count { XCTAssertEqual(stat(fx.inMount("file"), &st), 0) }
            let after = try fx.stats()
            func sum(_ stats: [String: String]) -> Int { Int(stats["hits"] ?? "0")! + Int(stats["misses"] ?? "0")! }
            return sum(after) - sum(before)
        }
        _ = try lookups(statting: 1)
        XCTAssertEqual(try lookups(statting: 5), 0, "cached for a day")
        let short = try proxybundle(["remount", fx.mountpoint, "-o", "entry_timeout=0,attr_timeout=0"])
        XCTAssertEqual(short.status, 0, short.error)
        XCTAssertEqual(try fx.stats()["entry_timeout"], "0")
        XCTAssertEqual(try Disk.read(fx.inMount(".remount")), "rw,entry_timeout=0,attr_timeout=0,negative_timeout=86400\n")
        XCTAssertGreaterThanOrEqual(try lookups(statting: 5), 5, "nothing cached")
        let long = try proxybundle(["remount", fx.mountpoint, "-o", "entry_timeout=86400,attr_timeout=86400"])
        XCTAssertEqual(long.status, 0, long.error)
        _ = try lookups(statting: 1)
        XCTAssertEqual(try lookups(statting: 5), 0, "cached again")
    }

    // MARK: refusals

    /// A bad option is refused in one line and nothing changes; options the mount already has
    /// are accepted (mount(8) passes them along).
    func testBadOptionsAreRefusedAndNothingChanges() throws {
        let helper = try HelperInstall()
        defer { helper.remove() }
        try fx.start()
        let state = try Disk.read(fx.inMount(".remount"))
        let refused: [([String], String)] = [
            (["-o", "ro,bogus"], "unknown mount option 'bogus'"),
            (["-o", "ro,="], "unknown mount option '='"),
            (["-o", "ro,entry_timeout=soon"], "entry_timeout takes a number of seconds, not 'soon'"),
            (["-o", "ro,acl"], "mount option 'acl' cannot change on a live mount"),
            (["-o", "ro,casefold"], "mount option 'casefold' cannot change on a live mount"),
            (["-o", "ro,substitution=/elsewhere"], "mount option 'substitution=/elsewhere' cannot change"),
            (["-o", "ro,patches=\(fx.root)"], "proxybundle layers \(fx.mountpoint) --set"),
            (["-o", "ro,max_threads=3"], "mount option 'max_threads=3' cannot change"),
            (["-o", "ro,allow_other"], "mount option 'allow_other' cannot change"),
        ]
        for (options, message) in refused {
            let result = try proxybundle(["remount", fx.mountpoint] + options)
            XCTAssertEqual(result.status, 1, "\(options)")
            XCTAssertTrue(result.error.contains(message), "\(options): \(result.error)")
            XCTAssertEqual(result.error.split(separator: "\n").count, 1, result.error)
            XCTAssertEqual(try Disk.read(fx.inMount(".remount")), state, "\(options) changed nothing")
            XCTAssertEqual(kernelOptions(fx.mountpoint).first, "rw")
        }
        let helped = try mountCommand(["-o", "remount,ro,acl", fx.mountpoint])
        XCTAssertNotEqual(helped.status, 0)
        XCTAssertTrue(helped.error.contains("mount option 'acl' cannot change"), helped.error)
        XCTAssertEqual(kernelOptions(fx.mountpoint).first, "rw")
        // written directly: EINVAL, all or nothing
        XCTAssertEqual(Probe.writeError("ro,bogus=1", to: fx.inMount(".remount")), EINVAL)
        XCTAssertEqual(try Disk.read(fx.inMount(".remount")), state)
        // an option of nothing around its '=' (found by fuzzing: it ended the daemon)
        for text in ["=", "ro,=", "=5", "entry_timeout="] {
            XCTAssertEqual(Probe.writeError(text, to: fx.inMount(".remount")), EINVAL, text)
            XCTAssertEqual(try Disk.read(fx.inMount(".remount")), state, "\(text): the daemon still serves, unchanged")
        }
        // what the mount has is accepted
        let same = try proxybundle(["remount", fx.mountpoint, "-o",
                                    "substitution=\(fx.substitution),noacl,nocasefold,transport=auto,nosuid"])
        XCTAssertEqual(same.status, 0, same.error)
    }

    func testNotAProxybundleMountIsRefused() throws {
        let plain = try proxybundle(["remount", fx.root, "-o", "ro"])
        XCTAssertEqual(plain.status, 1)
        XCTAssertTrue(plain.error.contains("is not a proxybundle mount"), plain.error)
        let other = try proxybundle(["remount", "/proc", "-o", "ro"])
        XCTAssertEqual(other.status, 1)
        XCTAssertTrue(other.error.contains("/proc is a proc mount, not a proxybundle mount"), other.error)
        XCTAssertEqual(kernelOptions("/proc").first, "rw")
        let none = try proxybundle(["remount", fx.mountpoint])
        XCTAssertNotEqual(none.status, 0)
    }

    /// A stopped daemon: the command gives up within the commands' patience and says so.
    func testStoppedDaemonIsNotWaitedFor() throws {
        try fx.start()
        kill(fx.daemon, SIGSTOP)
        let started = Date()
        let result = try proxybundle(["remount", fx.mountpoint, "-o", "ro"])
        XCTAssertLessThan(Date().timeIntervalSince(started), MountFixture.commandPatience, "remount took that long")
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.error.contains("does not answer"), result.error)
        XCTAssertEqual(kernelOptions(fx.mountpoint).first, "rw")
        kill(fx.daemon, SIGCONT)
    }

    /// A read-only mount sharing a substitution that another mount writes cannot be made
    /// writable: one line names the mount that writes it.
    func testWritableAgainNeedsTheSubstitution() throws {
        try fx.start(["-o", "ro"])
        let writer = try MountFixture(name + "writer")
        defer { writer.tearDown() }
        let mounted = try proxybundle(["mount", fx.main, writer.mountpoint, "--substitution", fx.substitution])
        XCTAssertEqual(mounted.status, 0, mounted.error)
        let result = try proxybundle(["remount", fx.mountpoint, "-o", "rw"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.error.contains("already written by the mount at \(writer.mountpoint)"), result.error)
        XCTAssertEqual(try fx.stats()["read_only"], "yes")
        _ = try proxybundle(["unmount", writer.mountpoint])
        let again = try proxybundle(["remount", fx.mountpoint, "-o", "rw"])
        XCTAssertEqual(again.status, 0, again.error)
        try checkWritable(fx.mountpoint)
    }
}
