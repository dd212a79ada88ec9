import Foundation
import ProxyBundleCore
import XCTest

/// Writes through a shared mapping change a file's modification and change times, as on any
/// local file system (tools that detect changes by mtime would miss them otherwise): a
/// main-bundle file (copied up by the open for writing) and a substitution file.
final class MappedWriteTests: XCTestCase {
    func testWritesThroughASharedMappingUpdateTheTimes() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try Disk.write(fx.inMain("main.bin"), String(repeating: "m", count: 8192))
        try Disk.write(fx.inPatch("substitution.bin"), String(repeating: "s", count: 8192))
        try fx.start()
        func seconds(_ t: timespec) -> Double { Double(t.tv_sec) + Double(t.tv_nsec) / 1e9 }
        for name in ["main.bin", "substitution.bin"] {
            let fd = open(fx.inMount(name), O_RDWR)
            let before = Disk.lstat(fx.inMount(name))
            usleep(50_000)  // past the file system's timestamp granularity
            XCTAssertGreaterThanOrEqual(fd, 0, "open \(name): errno \(errno)")
            guard fd >= 0 else { continue }
            let map = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            XCTAssertNotEqual(map, MAP_FAILED)
            if let map, map != MAP_FAILED {
                map.storeBytes(of: UInt8(ascii: "X"), as: UInt8.self)
                XCTAssertEqual(msync(map, 4096, MS_SYNC), 0)
                munmap(map, 4096)
            }
            close(fd)
            let st = Disk.lstat(fx.inMount(name))
            XCTAssertGreaterThan(seconds(st?.st_mtim ?? timespec()), seconds(before?.st_mtim ?? timespec()), "\(name): mtime")
            XCTAssertGreaterThan(seconds(st?.st_ctim ?? timespec()), seconds(before?.st_ctim ?? timespec()), "\(name): ctime")
            XCTAssertEqual(try Disk.read(fx.inPatch(name)).first, "X", "\(name): the write landed in the substitution")
        }
        XCTAssertEqual(try Disk.read(fx.inMain("main.bin")).first, "m", "the main bundle untouched")
    }
}
