import Foundation
import ProxyBundleCore
import XCTest

/// Mount options passed to FUSE and the kernel take effect: default_permissions, fsname=,
/// nosuid/nodev/noexec (at mount and at remount), max_threads=.
final class MountOptionTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        XCTAssertEqual(chmod(fx.root, 0o755), 0)  // other users reach the mount
    }

    override func tearDown() { fx?.tearDown() }

    private func asNobody(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups"] + arguments, seconds: 10)
    }

    /// With default_permissions the kernel checks the mode bits: another user reads a 0644
    /// file and is refused a 0600 one, as on the main bundle's own file system.
    func testDefaultPermissionsHasTheKernelCheckTheModeBits() throws {
        try Disk.write(fx.inMain("open"), "for all\n", mode: 0o644)
        try Disk.write(fx.inMain("secret"), "root's\n", mode: 0o600)
        try fx.start(["-o", "default_permissions,allow_other"])
        let options = MountTable.current().mount(at: fx.mountpoint)?.superOptions ?? []
        XCTAssertEqual(options.filter { $0 == "default_permissions" }.count, 1, "\(options)")
        XCTAssertEqual(try asNobody(["/bin/cat", fx.inMount("open")]).output, "for all\n")
        let refused = try asNobody(["/bin/cat", fx.inMount("secret")])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.error.contains("Permission denied"), refused.error)
        XCTAssertEqual(try asNobody(["/bin/cat", fx.inMain("secret")]).status, refused.status, "as on the layer itself")
    }

    /// fsname= is the mount's source in the mount table; without it, the main bundle's path.
    func testFsnameNamesTheMountsSource() throws {
        try fx.start()
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.source, RawPath(fx.main))
        fx.stop()
        try fx.start(["-o", "fsname=demo-resources"])
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.source, RawPath("demo-resources"))
        let mounted = try Spawn.run("/bin/findmnt", ["-n", "-o", "SOURCE", fx.mountpoint])
        XCTAssertEqual(mounted.output, "demo-resources\n")
    }

    /// noexec refuses to run a program of the mount, nodev to open a device node of it,
    /// nosuid to run a set-user-ID program as its owner; a remount turns each off and on.
    func testNosuidNodevNoexecTakeEffectAtMountAndRemount() throws {
        try Disk.write(fx.inMain("run.sh"), "#!/bin/sh\necho ran\n", mode: 0o755)
        // /dev/null: major 1, minor 3
        XCTAssertEqual(mknod(fx.inMain("null"), S_IFCHR | 0o666, dev_t((1 << 8) | 3)), 0, "mknod: errno \(errno)")
        let id = fx.inMain("id")
        XCTAssertEqual(try Spawn.run("/bin/cp", ["/usr/bin/id", id]).status, 0)
        XCTAssertEqual(chmod(id, 0o4755), 0)
        try fx.start(["-o", "nosuid,nodev,noexec,allow_other"])
        try expect(exec: false, dev: false, suid: false, "at mount")
        try remount("exec,dev,suid")
        try expect(exec: true, dev: true, suid: true, "remounted exec,dev,suid")
        try remount("noexec,nodev,nosuid")
        try expect(exec: false, dev: false, suid: false, "remounted noexec,nodev,nosuid")
    }

    private func remount(_ options: String) throws {
        let result = try proxybundle(["remount", fx.mountpoint, "-o", options])
        XCTAssertEqual(result.status, 0, result.error)
    }

    private func expect(exec: Bool, dev: Bool, suid: Bool, _ when: String) throws {
        var st = statvfs()
        XCTAssertEqual(statvfs(fx.mountpoint, &st), 0)
        let flags = UInt(st.f_flag)
        XCTAssertEqual(flags & 8 == 0, exec, "ST_NOEXEC \(when)")
        XCTAssertEqual(flags & 4 == 0, dev, "ST_NODEV \(when)")
        XCTAssertEqual(flags & 2 == 0, suid, "ST_NOSUID \(when)")
        let run = try Spawn.run("/bin/sh", ["-c", "exec '\(fx.inMount("run.sh"))'"])
        XCTAssertEqual(run.status == 0 && run.output == "ran\n", exec, "run.sh \(when): \(run.error)")
        let fd = open(fx.inMount("null"), O_WRONLY)
        let openError = fd >= 0 ? 0 : errno
        if fd >= 0 { close(fd) }
        XCTAssertEqual(openError, dev ? 0 : EACCES, "open of the device node \(when)")
        guard exec else { return }
        let effective = try asNobody([fx.inMount("id"), "-u"])
        XCTAssertEqual(effective.output, suid ? "0\n" : "65534\n", "set-user-ID id \(when): \(effective.error)")
    }

    /// max_threads=N: with N requests held in the daemon (opens of leased files), a request
    /// more is served only once one of them ends. With 3 workers and 2 held it is served at
    /// once, which shows the check sees a free worker.
    func testMaxThreadsBoundsTheRequestsServedAtOnce() throws {
        for index in 0..<2 { try Disk.write(fx.inMain("held\(index)"), "held \(index)") }
        try Disk.write(fx.inMain("free"), "free")
        for threads in [3, 2] {
            try fx.start(["-o", "max_threads=\(threads),transport=device"])
            _ = try Disk.read(fx.inMount("free"))  // looked up and cached: the next cat is one open
            let leases = try (0..<2).map { try Lease(fx.inMain("held\($0)")) }
            defer { leases.forEach { $0.release() } }
            let readers = try (0..<2).map { try Spawn.start("/bin/cat", [fx.inMount("held\($0)")], stdoutPath: "/dev/null") }
            try eventually("two workers wait for a lease") { leases.allSatisfy(\.isWanted) }
            let third = try Spawn.start("/bin/cat", [fx.inMount("free")], stdoutPath: "/dev/null")
            if threads > 2 {
                XCTAssertEqual(Spawn.wait(third, seconds: 20), 0, "a third worker serves the request")
            } else {
                try eventually("the third request is sent") { KernelWait.isInTheDaemonOrDone(third) }
                XCTAssertFalse(KernelWait.hasEnded(third), "a request was served with both workers held")
                leases[0].release()
                XCTAssertEqual(Spawn.wait(third, seconds: 20), 0, "the request once a worker is free")
            }
            leases.forEach { $0.release() }
            for reader in readers { XCTAssertEqual(Spawn.wait(reader, seconds: 20), 0) }
            fx.stop()
        }
    }
}
