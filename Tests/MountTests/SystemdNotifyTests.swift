import Foundation
import ProxyBundleCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `Type=notify`: a foreground daemon sends READY=1 to `$NOTIFY_SOCKET` once its mount
/// answers, as systemd's listener would receive it (a datagram socket this test binds).
final class SystemdNotifyTests: XCTestCase {
    private var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx.tearDown() }

    func testReadyArrivesOnceTheMountAnswersOnAPathSocket() throws {
        try checkReady(socketName: fx.root + "/notify")
    }

    func testReadyArrivesOnAnAbstractSocket() throws {
        try checkReady(socketName: "@proxybundle-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    }

    /// A detached daemon is not the process systemd started: it says nothing (systemd would
    /// log each message from another pid as refused).
    func testADetachedDaemonSendsNothing() throws {
        let listener = try Listener(fx.root + "/notify")
        defer { listener.close() }
        let mounted = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                          "--log-file", fx.logPath] + MountFixture.transportOptions,
                                    environment: ["NOTIFY_SOCKET=\(fx.root)/notify"])
        XCTAssertEqual(mounted.status, 0, mounted.error)
        XCTAssertNil(listener.receive(seconds: 1))
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["unmount", fx.mountpoint]).status, 0)
    }

    private func checkReady(socketName: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try Disk.write(fx.inMain("Info.plist"), "main")
        let listener = try Listener(socketName)
        defer { listener.close() }
        let pid = try Spawn.start(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                        "--foreground"] + MountFixture.transportOptions,
                                  stderrPath: fx.logPath,
                                  environment: ["PROXYBUNDLE_EXIT_WITH_PARENT=1", "NOTIFY_SOCKET=\(socketName)"])
        defer {
            kill(pid, SIGTERM)
            _ = Spawn.wait(pid, seconds: 10)
        }
        let message = listener.receive(seconds: 15)
        // at the moment it arrives the mount is there and serves
        XCTAssertEqual(MountTable.current().mount(at: fx.mountpoint)?.type, "fuse.proxybundle", file: file, line: line)
        XCTAssertEqual(try? Disk.read(fx.inMount("Info.plist")), "main", file: file, line: line)
        XCTAssertEqual(message?.split(separator: "\n").first, "READY=1", "\(message ?? "nothing") " + fx.log, file: file, line: line)
        XCTAssertNil(listener.receive(seconds: 0.2), "READY=1 is sent once", file: file, line: line)
    }
}

/// A datagram socket bound to a path, or to an abstract name written `@name`.
private struct Listener {
    let fd: Int32

    init(_ name: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
            if bytes.first == UInt8(ascii: "@") { raw[0] = 0 }
        }
        let length = socklen_t(2 + bytes.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else { throw TestFailure("bind \(name): errno \(errno)") }
    }

    /// The next datagram as text, or nil when none came within `seconds`.
    func receive(seconds: Double) -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count < 0 ? nil : String(decoding: buffer[..<count], as: UTF8.self)
    }

    func close() { _ = Glibc.close(fd) }
}
