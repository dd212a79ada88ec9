import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// Reading and running files through the mount never changes the main bundle's or a patch's
/// access times (kernel overlayfs opens its lower files O_NOATIME), also where the kernel reads
/// a file itself (passthrough); with -o noatime neither does the mount's own view of them.
final class AccessTimeTests: XCTestCase {
    func testReadingAndRunningLeaveTheReadOnlyLayersAccessTimesAlone() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let patch = fx.root + "/patch1"
        try Disk.write(fx.inMain("run.sh"), "#!/bin/sh\necho ran\n", mode: 0o755)
        try Disk.write(fx.inMain("data.txt"), String(repeating: "d", count: 100_000))
        try Disk.write(patch + "/patched.txt", "p")
        try fx.start(["-o", "noatime"], patches: [patch])
        // old access times, set once the fixture's own checksum of the main bundle has read it
        let old = timespec(tv_sec: 1_000_000_000, tv_nsec: 0)
        for path in [fx.inMain("run.sh"), fx.inMain("data.txt"), patch + "/patched.txt"] {
            var times = [old, timespec(tv_sec: 0, tv_nsec: Int(pb_UTIME_OMIT))]
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        }
        try fx.acceptLayersAsTheyAre()  // the change of times made here, not by the daemon
        try Disk.write(fx.inMount(".invalidate"), "\n")
        for name in ["data.txt", "patched.txt", "run.sh"] { _ = try Disk.read(fx.inMount(name)) }
        let ran = try Spawn.run(fx.inMount("run.sh"), [])
        XCTAssertEqual(ran.output, "ran\n", ran.error)
        for path in [fx.inMain("run.sh"), fx.inMain("data.txt"), patch + "/patched.txt"] {
            XCTAssertEqual(Disk.lstat(path)?.st_atim.tv_sec, old.tv_sec, "\(path): its access time changed")
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("run.sh"))?.st_atim.tv_sec, old.tv_sec, "as the mount shows it")
    }

    /// Under noatime, reading and running files and listing directories through the mount leaves
    /// the access times of main-bundle and substitution entries as kernel overlayfs mounted
    /// noatime leaves them (alone), as the mounts show them and as the substitution and the
    /// kernel's upper layer hold them.
    func testUnderNoatimeAccessTimesStayAsOnKernelOverlayfs() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        let kernel = fx.root + "/kernel", upper = fx.root + "/kernel-upper"
        let names = ["main.sh", "main.txt", "sub.sh", "sub.txt", "merged", "subdir"]
        for name in names {
            let path = name.hasPrefix("main") ? fx.inMain(name) : fx.inSubstitution(name)
            if name.hasSuffix("dir") || name == "merged" {
                try Disk.write(path + "/in-substitution", "")
                if name == "merged" { try Disk.write(fx.inMain(name + "/in-main"), "") }
            } else {
                try Disk.write(path, name.hasSuffix(".sh") ? "#!/bin/sh\necho ran\n" : "data", mode: 0o755)
            }
        }
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, upper])
        XCTAssertEqual(copy.status, 0, copy.error)
        // old times, set once the copy has read the substitution
        for name in names {
            for path in name.hasPrefix("main") ? [fx.inMain(name)] : [fx.inSubstitution(name), upper + "/" + name] {
                var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_100, tv_nsec: 0)]
                XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
            }
        }
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(lowers: [fx.main], at: kernel, upper: upper, flags: UInt(MS_NOATIME))
        try fx.start(["-o", "noatime"])
        for root in [fx.mountpoint, kernel] {
            for name in names where name.hasSuffix(".txt") { _ = try Disk.read(root + "/" + name) }
            for name in names where !name.contains(".") { _ = try Disk.list(root + "/" + name) }
            for name in names where name.hasSuffix(".sh") {
                let ran = try Spawn.run(root + "/" + name, [])
                XCTAssertEqual(ran.output, "ran\n", ran.error)
            }
        }
        func accessed(_ path: String) -> Int? { Disk.lstat(path).map { $0.st_atim.tv_sec } }
        XCTAssertEqual(accessed(upper + "/sub.sh"), 1_000_000_000, "kernel overlayfs left it alone")
        for name in names {
            XCTAssertEqual(accessed(fx.inMount(name)), accessed(kernel + "/" + name), "\(name) as the mounts show it")
            if !name.hasPrefix("main") {
                XCTAssertEqual(accessed(fx.inSubstitution(name)), accessed(upper + "/" + name), "\(name) in the upper layers")
            }
        }
    }
}
