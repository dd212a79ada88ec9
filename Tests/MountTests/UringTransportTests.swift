import CSyscalls
import Foundation
import XCTest

/// FUSE over io_uring (`-o transport=`, see `Sources/CFuseShim/Uring.c`): where the fuse
/// module's `enable_uring` is on, requests come through the daemon's rings and their data
/// arrives whole; `device` keeps to /dev/fuse; `uring` where the kernel does not offer it is
/// refused in one line; and the daemon still ends promptly. Each test sets the module's switch
/// and puts it back as it was.
final class UringTransportTests: XCTestCase {
    var fx: MountFixture!
    private var savedSwitch: String?

    override func setUpWithError() throws {
        savedSwitch = UringSwitch.value
        guard savedSwitch != nil else { throw MachineSkip.noUring() }
        fx = try MountFixture(name)
    }

    override func tearDown() {
        if let fx, fx.isRunning { kill(fx.daemon, SIGCONT) }
        fx?.tearDown()
        if let savedSwitch, UringSwitch.value != savedSwitch {
            XCTAssertNoThrow(try UringSwitch.set(savedSwitch), "the module's switch put back")
        }
    }

    private struct Figures {
        var transport: String
        var uring: Int
        var device: Int
    }

    private func figures() throws -> Figures {
        let stats = try fx.stats()
        guard let transport = stats["transport"], let uring = Int(stats["requests_uring"] ?? ""),
              let device = Int(stats["requests_device"] ?? "") else {
            throw TestFailure(".stats has no transport figures: \(stats)")
        }
        return Figures(transport: transport, uring: uring, device: device)
    }

    /// How many requests of each transport `body` made, less what reading `.stats` makes.
    private func requests(_ body: () throws -> Void) throws -> (uring: Int, device: Int) {
        let first = try figures()
        let second = try figures()
        let reading = (uring: second.uring - first.uring, device: second.device - first.device)
        try body()
        let after = try figures()
        return (after.uring - second.uring - reading.uring, after.device - second.device - reading.device)
    }

    /// Waits for the rings to carry the requests: their threads register once INIT is answered,
    /// so the first requests of a mount may still come through /dev/fuse.
    private func waitForRings(_ context: String = "", file: StaticString = #filePath, line: UInt = #line) throws {
        try eventually("the rings carry the requests \(context)") { try figures().transport == "uring" }
    }

    /// The ring threads of the daemon, by name (pb-ring-QUEUE).
    private func ringThreads() throws -> [String] {
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(fx.daemon)/task")
        return tasks.compactMap { try? String(contentsOfFile: "/proc/\(fx.daemon)/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .newlines) }.filter { $0.hasPrefix("pb-ring-") }
    }

    private var possibleCPUs: Int {
        let text = (try? String(contentsOfFile: "/sys/devices/system/cpu/possible", encoding: .utf8)) ?? "0"
        let numbers = text.split { !$0.isNumber }.compactMap { Int($0) }
        return (numbers.max() ?? 0) + 1
    }

    func testRequestsGoThroughTheRingsWhereTheKernelOffersThem() throws {
        try UringSwitch.set("Y")
        for index in 0..<20 { try Disk.write(fx.inMain("dir/file\(index)"), "main \(index)") }
        for index in 0..<10 { try Disk.write(fx.inMain("listed\(index)/a"), "") }
        try fx.start(["-o", "transport=auto"])
        try waitForRings()
        // a ring thread per entry, every queue (one per possible CPU) with two or more
        let threads = try ringThreads()
        XCTAssertEqual(Set(threads), Set((0..<possibleCPUs).map { "pb-ring-\($0)" }), "\(threads)")
        XCTAssertGreaterThanOrEqual(threads.count, 2 * possibleCPUs)

        // each group's least number of requests: a read is a LOOKUP and an OPEN at least, a
        // listing a LOOKUP and a READDIRPLUS
        let groups: [(String, Int, () throws -> Void)] = [
            ("reads", 40, {
                for index in 0..<20 { XCTAssertEqual(try Disk.read(self.fx.inMount("dir/file\(index)")), "main \(index)") }
            }),
            ("creates and writes", 20, {
                for index in 0..<20 { try Disk.write(self.fx.inMount("new/made\(index)"), "made \(index)") }
            }),
            ("listings", 20, {
                XCTAssertEqual(try Disk.list(self.fx.inMount("dir")).sorted(), (0..<20).map { "file\($0)" }.sorted())
                for index in 0..<10 { XCTAssertEqual(try Disk.list(self.fx.inMount("listed\(index)")), ["a"]) }
            }),
            ("renames", 20, {
                for index in 0..<20 {
                    XCTAssertEqual(rename(self.fx.inMount("new/made\(index)"), self.fx.inMount("new/moved\(index)")), 0, "errno \(errno)")
                }
            }),
        ]
        for (name, least, body) in groups {
            let made = try requests(body)
            XCTAssertGreaterThanOrEqual(made.uring, least, "\(name) through the rings")
            XCTAssertLessThanOrEqual(made.device, 5, "\(name) through /dev/fuse (only FORGET and INTERRUPT belong there)")
        }
        for index in 0..<20 {
            XCTAssertEqual(try Disk.read(fx.inSubstitution("new/moved\(index)")), "made \(index)")
            XCTAssertEqual(Disk.lstatError(fx.inSubstitution("new/made\(index)")), ENOENT)
        }
        XCTAssertEqual(try figures().transport, "uring")
    }

    /// Page-cached opens (no passthrough): file data itself travels in the rings' payload
    /// buffers, as READ replies and WRITE requests of up to a megabyte; and requests whose
    /// own struct and payload have other shapes (a 255-byte name, extended attributes, a
    /// listing of long names) arrive whole.
    func testDataAndNamesArriveWholeThroughTheRings() throws {
        try UringSwitch.set("Y")
        var generator = SystemRandomNumberGenerator()
        let data = Data((0..<(3 << 20) + 4_321).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try data.write(to: URL(fileURLWithPath: fx.inMain("big.bin")))
        let long = String(repeating: "n", count: 250) + ".long"
        for index in 0..<300 { try Disk.write(fx.inMain("many/\(long.prefix(200))-\(index)"), "") }
        fx.environment = ["PROXYBUNDLE_NO_PASSTHROUGH=1"]
        try fx.start(["-o", "transport=uring"])
        try waitForRings()

        let made = try requests {
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: fx.inMount("big.bin"))), data, "read through the mount")
            let fd = open(fx.inMount("copy.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0, "errno \(errno)")
            // writes of 200 KiB and of the whole file: WRITE requests of up to max_write
            for start in stride(from: 0, to: data.count, by: 200 << 10) {
                let chunk = data[start..<min(data.count, start + (200 << 10))]
                XCTAssertEqual(chunk.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }, chunk.count)
            }
            XCTAssertEqual(data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }, data.count)
            XCTAssertEqual(fsync(fd), 0)
            close(fd)
        }
        XCTAssertGreaterThanOrEqual(made.uring, 8, "reads and writes through the rings")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: fx.inSubstitution("copy.bin"))), data, "written through the mount")

        try Disk.write(fx.inMount(long), "long name")
        XCTAssertEqual(try Disk.read(fx.inMount(long)), "long name")
        XCTAssertEqual(try Disk.read(fx.inSubstitution(long)), "long name")
        let value = Array("value of the attribute".utf8)
        XCTAssertEqual(setxattr(fx.inMount(long), "user.proxybundle.test", value, value.count, 0), 0, "errno \(errno)")
        var read = [UInt8](repeating: 0, count: 64)
        let length = getxattr(fx.inMount(long), "user.proxybundle.test", &read, read.count)
        XCTAssertEqual(Array(read.prefix(max(0, length))), value)
        let listed = try FileManager.default.contentsOfDirectory(atPath: fx.inMount("many"))
        XCTAssertEqual(Set(listed), Set((0..<300).map { "\(long.prefix(200))-\($0)" }))
        XCTAssertEqual(try figures().transport, "uring")
    }

    func testTheDeviceTransportKeepsToDevFuseWhereTheRingIsOffered() throws {
        try UringSwitch.set("Y")
        try fx.start(["-o", "transport=device"])
        let made = try requests {
            for index in 0..<20 { try Disk.write(fx.inMount("made\(index)"), "made \(index)") }
        }
        XCTAssertEqual(made.uring, 0)
        XCTAssertGreaterThanOrEqual(made.device, 20)
        let now = try figures()
        XCTAssertEqual(now.transport, "device")
        XCTAssertEqual(now.uring, 0)
        XCTAssertEqual(try ringThreads(), [])
    }

    func testTheDefaultUsesDevFuseWhereTheKernelDoesNotOfferTheRing() throws {
        try UringSwitch.set("N")
        try fx.start(["-o", "transport=auto"])
        let made = try requests {
            for index in 0..<20 { try Disk.write(fx.inMount("made\(index)"), "made \(index)") }
        }
        XCTAssertGreaterThanOrEqual(made.device, 20)
        let now = try figures()
        XCTAssertEqual(now.transport, "device")
        XCTAssertEqual(now.uring, 0)
        XCTAssertEqual(try ringThreads(), [])
    }

    func testAskingForTheRingWhereTheKernelDoesNotOfferItIsRefusedInOneLine() throws {
        try UringSwitch.set("N")
        for mode in [["--foreground"], []] {
            let result = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                             "-o", "transport=uring"] + mode, seconds: 30)
            XCTAssertNotEqual(result.status, 0, "\(mode)")
            let lines = result.error.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, result.error)
            XCTAssertTrue(result.error.contains("transport=uring") && result.error.contains("enable_uring"), result.error)
            XCTAssertFalse(fx.isMounted, "\(mode)")
        }
        let bogus = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                        "-o", "transport=fast"], seconds: 30)
        XCTAssertNotEqual(bogus.status, 0)
        XCTAssertTrue(bogus.error.contains("transport takes auto, uring or device"), bogus.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// SIGTERM and an unmount from outside each end the daemon with status 0 within a couple of
    /// seconds, its rings closed and nothing left mounted; twice each, with requests served.
    func testSignalsAndUnmountEndTheDaemonPromptly() throws {
        try UringSwitch.set("Y")
        for ending in ["SIGTERM", "umount", "SIGTERM", "umount"] {
            try fx.start(["-o", "transport=uring"])
            try waitForRings(ending)
            for index in 0..<10 { try Disk.write(fx.inMount("made\(index)"), "made") }
            let started = Date()
            let status: Int32?
            if ending == "SIGTERM" {
                status = fx.stop()
            } else {
                let result = try Spawn.run("/bin/umount", [fx.mountpoint], seconds: 10)
                XCTAssertEqual(result.status, 0, result.error)
                status = fx.waitForExit(seconds: 10)
            }
            let seconds = Date().timeIntervalSince(started)
            XCTAssertEqual(status, 0, ending)
            XCTAssertLessThan(seconds, 3, "\(ending) took \(seconds) s")
            XCTAssertFalse(fx.isMounted, ending)
            fx.tearDown()
            fx = try MountFixture(name)
        }
    }

    /// A daemon stopped with SIGSTOP holds whatever its rings were given, and the kernel lets
    /// no signal end a caller waiting there; the commands still give up in bounded time and
    /// exit (their calls on the mount are made in children left behind), and unmount clears it.
    func testCommandsGiveUpOnAStoppedDaemon() throws {
        try UringSwitch.set("Y")
        try Disk.write(fx.inMain("file"), "main")
        try fx.start(["-o", "transport=uring"])
        try waitForRings()
        kill(fx.daemon, SIGSTOP)
        let commands: [(arguments: [String], status: Int32, says: String)] = [
            (["status", fx.mountpoint], 0, "state: not answering"),
            (["invalidate", fx.mountpoint], 1, "does not answer"),
            (["layers", fx.mountpoint], 1, "does not answer"),
            (["mount", fx.main, fx.mountpoint, "--substitution", fx.root + "/other"], 1, "does not answer"),
        ]
        for command in commands {
            let started = Date()
            let result = try Spawn.run(MountFixture.binary, command.arguments, seconds: 20)
            let took = Date().timeIntervalSince(started)
            XCTAssertEqual(result.status, command.status, "\(command.arguments): \(result.output) \(result.error)")
            XCTAssertTrue((result.output + result.error).contains(command.says), "\(command.arguments): \(result.output) \(result.error)")
            XCTAssertLessThan(took, MountFixture.commandPatience, "\(command.arguments) took \(took) s")
        }
        let unmount = try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint], seconds: 20)
        XCTAssertEqual(unmount.status, 0, unmount.error)
        XCTAssertFalse(fx.isMounted)
    }

    /// With auto_unmount the mount of a killed daemon goes away over the rings too, though the
    /// kernel drops the connection only once it has cancelled the rings' commands, after the
    /// death (see `AutoUnmount`). Before, transport=uring was refused with auto_unmount.
    func testAutoUnmountOverTheRings() throws {
        try UringSwitch.set("Y")
        try fx.start(["-o", "auto_unmount,transport=uring"])
        try waitForRings()
        XCTAssertEqual(try figures().transport, "uring")
        kill(fx.daemon, SIGKILL)
        XCTAssertNotNil(fx.waitForExit(seconds: 10))
        try eventually("unmounted once the daemon was killed") { !fx.isMounted }
    }

    /// The rings' threads poll for the next request as /dev/fuse's workers do (-o spin=): an
    /// idle daemon still uses no processor time, and paced requests make polling back off.
    func testPollingRingsCostNothingWhenIdleAndBackOff() throws {
        try UringSwitch.set("Y")
        try fx.start(["-o", "spin=1000,transport=uring"])
        try waitForRings()
        for index in 0..<500 { XCTAssertEqual(Disk.lstatError(fx.inMount("burst-\(index)")), ENOENT) }
        XCTAssertEqual(try figures().transport, "uring")
        try eventually("the daemon's threads sleep after the burst") { KernelWait.allThreadsSleep(fx.daemon) }
        var before = try fx.processorTicks()
        // the interval is what is measured: processor time used in an idle second
        usleep(1_000_000)
        XCTAssertLessThanOrEqual(try fx.processorTicks() - before, 2, "ticks of processor time in an idle second")
        // 200 requests 4 ms apart (the pause is the input): without backing off, 1 ms of
        // polling after each, 20 ticks
        before = try fx.processorTicks()
        for index in 0..<200 {
            XCTAssertEqual(Disk.lstatError(fx.inMount("paced-\(index)")), ENOENT)
            usleep(4_000)
        }
        XCTAssertLessThan(try fx.processorTicks() - before, 8, "ticks of processor time for 200 paced lookups")
    }
}
