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
        try fx.start(["--patch", patch, "-o", "noatime"])
        // old access times, set once the fixture's own checksum of the main bundle has read it
        let old = timespec(tv_sec: 1_000_000_000, tv_nsec: 0)
        for path in [fx.inMain("run.sh"), fx.inMain("data.txt"), patch + "/patched.txt"] {
            var times = [old, timespec(tv_sec: 0, tv_nsec: Int(pb_UTIME_OMIT))]
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
        }
        try fx.acceptMainBundleAsItIs()  // the change of times made here, not by the daemon
        try Disk.write(fx.inMount(".invalidate"), "\n")
        for name in ["data.txt", "patched.txt", "run.sh"] { _ = try Disk.read(fx.inMount(name)) }
        let ran = try Spawn.run(fx.inMount("run.sh"), [])
        XCTAssertEqual(ran.output, "ran\n", ran.error)
        for path in [fx.inMain("run.sh"), fx.inMain("data.txt"), patch + "/patched.txt"] {
            XCTAssertEqual(Disk.lstat(path)?.st_atim.tv_sec, old.tv_sec, "\(path): its access time changed")
        }
        XCTAssertEqual(Disk.lstat(fx.inMount("run.sh"))?.st_atim.tv_sec, old.tv_sec, "as the mount shows it")
    }
}
