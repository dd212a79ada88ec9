import Foundation
import ProxyBundleCore
import XCTest

/// A main bundle, a substitution directory and a mountpoint in a fresh temporary directory,
/// and the built `proxybundle` daemon serving them, with any patches the test gives. `stop()`
/// always leaves nothing mounted: SIGTERM, then aborting the FUSE connection, then a lazy
/// unmount. `tearDown()` fails the test if a read-only layer (the main bundle or a patch)
/// changed: each is fingerprinted (paths, stat, content hashes) when a mount is started.
final class MountFixture {
    let root: String
    let main: String
    let substitution: String
    let mountpoint: String
    let logPath: String
    private(set) var daemon: pid_t = 0
    /// Whether the daemon was reaped by `exited` or `waitForExit` (its pid then kept, never 0,
    /// so a stray kill(fx.daemon) cannot reach the test's own process group).
    private var reaped = false
    /// The read-only layers' fingerprints (TreeChecksum), by path: compared in tearDown.
    private var readOnly: [String: String] = [:]
    /// More `NAME=value` settings for the daemon's environment.
    var environment: [String] = []
    /// Mounts the test made by other means (the mount command run as a user would, a second
    /// mount): unmounted at teardown, by the command first, as a user would, and whatever it
    /// could not unmount goes anyway.
    var otherMounts: [String] = []
    /// Whether `start` gives the daemon the substitution directory (false: the test passes
    /// `--no-substitution` or its own).
    var usesSubstitution = true

    init(_ name: String = #function) throws {
        let base = FileManager.default.temporaryDirectory.path
        let template = "\(base)/pb-\(name.filter { $0.isLetter || $0.isNumber })-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw TestFailure("mkdtemp failed: \(errno)") }
        root = String(cString: made)
        main = root + "/main"
        substitution = root + "/substitution"
        mountpoint = root + "/mnt"
        logPath = root + "/daemon.log"
        for dir in [main, substitution, mountpoint] {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        MountFixture.live.withLock { $0[main] = Weak(self) }
    }

    deinit { MountFixture.live.withLock { $0[main] = nil } }

    private struct Weak { weak var fixture: MountFixture?; init(_ fixture: MountFixture) { self.fixture = fixture } }
    /// The fixtures alive, by main bundle: a mount command the tests start of one (detached,
    /// through Spawn) fingerprints that main bundle too, as `start` does.
    private static let live = Locked<[String: Weak]>([:], rank: .local)

    /// Called by Spawn for every `proxybundle` it starts: `mount MAIN ...` of a fixture's main
    /// bundle fingerprints it for tearDown.
    static func noteCommand(_ arguments: [String]) {
        guard arguments.count > 1, arguments[0] == "mount",
              let fixture = live.withLock({ $0[arguments[1]]?.fixture }) else { return }
        try? fixture.guardUnchanged([fixture.main])
    }

    /// The built daemon: beside the test bundle, or PROXYBUNDLE_BIN.
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["PROXYBUNDLE_BIN"] { return path }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // the test runner may live inside an .xctest bundle directory
        while dir.path != "/" && !FileManager.default.fileExists(atPath: dir.appendingPathComponent("proxybundle").path) {
            dir = dir.deletingLastPathComponent()
        }
        return dir.appendingPathComponent("proxybundle").path
    }

    /// The transport every mount of the suite asks for (`-o transport=`), unless its test
    /// chose one: PROXYBUNDLE_TEST_TRANSPORT=uring runs the suite over io_uring (with the fuse
    /// module's enable_uring on; a mount is refused otherwise), =device over /dev/fuse. Unset,
    /// mounts take the default (io_uring where the kernel offers it).
    static var transportOptions: [String] {
        guard let transport = ProcessInfo.processInfo.environment["PROXYBUNDLE_TEST_TRANSPORT"], !transport.isEmpty else { return [] }
        return ["-o", "transport=\(transport)"]
    }

    /// How long a command may take on a daemon that does not answer: the README promises it
    /// gives up within 2 s; the rest is a margin for starting the command on a busy machine.
    static let commandPatience: Double = 3

    /// Mounts in the foreground as a child process with `patches` (highest priority first)
    /// and waits until the mount answers. The main bundle and the patches are fingerprinted.
    func start(_ extra: [String] = [], patches: [String] = []) throws {
        try guardUnchanged(patches)  // the main bundle: by Spawn, as for any mount command
        let chosen = extra.contains { $0.contains("transport=") }
        let arguments = ["mount", main, mountpoint] + (usesSubstitution ? ["--substitution", substitution] : [])
            + ["--foreground"] + patches.flatMap { ["--patch", $0] } + extra + (chosen ? [] : MountFixture.transportOptions)
        daemon = try Spawn.start(MountFixture.binary, arguments, stderrPath: logPath,
                                 environment: ["PROXYBUNDLE_EXIT_WITH_PARENT=1"] + environment)
        reaped = false
        try waitForMount()
    }

    /// Runs `proxybundle ARGUMENTS` as typed, a mount command that stays as the daemon
    /// (`--foreground`, `-o debug`), and waits until the mount answers.
    func startCommand(_ arguments: [String]) throws {
        daemon = try Spawn.start(MountFixture.binary, arguments, stderrPath: logPath,
                                 environment: ["PROXYBUNDLE_EXIT_WITH_PARENT=1"] + environment)
        reaped = false
        try waitForMount()
    }

    func waitForMount(seconds: Double = 15) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if isMounted {
                var st = stat()
                if stat(mountpoint, &st) == 0 { return }
            }
            if daemon > 0, Spawn.exited(daemon) != nil {
                daemon = 0
                throw TestFailure("daemon exited before mounting: \(log)")
            }
            usleep(10_000)
        }
        throw TestFailure("mount did not appear within \(seconds) s: \(log)")
    }

    var isMounted: Bool { MountTable.current().mount(at: mountpoint) != nil }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The daemon's exit status once it has ended (it is then reaped and forgotten, so
    /// nothing signals its pid again), else nil. Tests wait for the daemon only through this
    /// and `waitForExit`, never by its pid.
    /// Whether the daemon started and has not been seen to end.
    var isRunning: Bool { daemon > 0 && !reaped }

    func exited() -> Int32? {
        guard daemon > 0, !reaped, let status = Spawn.exited(daemon) else { return nil }
        reaped = true
        return status
    }

    /// Waits up to `seconds` for the daemon to end: its exit status, or nil.
    func waitForExit(seconds: Double) -> Int32? {
        guard daemon > 0, !reaped, let status = Spawn.wait(daemon, seconds: seconds) else { return nil }
        reaped = true
        return status
    }

    /// Stops the daemon and makes sure nothing is left mounted. Returns the daemon's exit status.
    @discardableResult
    func stop() -> Int32? {
        var status: Int32? = nil
        if daemon > 0 && !reaped {
            kill(daemon, SIGTERM)
            status = Spawn.wait(daemon, seconds: 10)
            if status == nil {
                kill(daemon, SIGKILL)
                status = Spawn.wait(daemon, seconds: 5)
            }
        }
        daemon = 0
        Unmounter.force(mountpoint)
        return status
    }

    /// Fingerprints `layers` as they are now, as read-only layers that tearDown checks: for
    /// patches a test gives a mount itself (`--patches-from`, `.layers`, a detached mount).
    func guardUnchanged(_ layers: [String]) throws {
        for layer in layers { readOnly[layer] = try TreeChecksum.of(layer) }
    }

    /// Stops, checks that no read-only layer changed, and removes the directory (unless still
    /// mounted).
    func tearDown() {
        for mountpoint in Set(otherMounts) {
            _ = try? proxybundle(["unmount", mountpoint])
            Unmounter.force(mountpoint)
        }
        stop()
        // the daemon is a debug build, whose locks check their order (see `LockOrder`)
        let log = self.log
        if let violation = log.range(of: "lock order violated") {
            XCTFail("the daemon broke the lock order: " + log[violation.lowerBound...].prefix(600))
        }
        for (layer, before) in readOnly.sorted(by: { $0.key < $1.key }) {
            let role = layer == main ? "the main bundle" : "the patch \(layer)"
            // a layer the test removed itself is not checked
            if let now = try? TreeChecksum.of(layer) { XCTAssertEqual(now, before, "\(role) was modified") }
        }
        if !isMounted { try? FileManager.default.removeItem(atPath: root) }
    }

    /// Replaces a main-bundle file on disk as an updater would (a new file renamed over it),
    /// and takes that as the main bundle's expected state from now on.
    func replaceMainFile(_ relative: String, with content: String) throws {
        let temporary = root + "/replacement.tmp"
        try Disk.write(temporary, content)
        guard rename(temporary, inMain(relative)) == 0 else { throw TestFailure("rename into main: errno \(errno)") }
        try acceptMainBundleAsItIs()
    }

    /// Takes the main bundle's state now (changed by the test itself) as its expected state.
    func acceptMainBundleAsItIs() throws {
        try guardUnchanged([main])
    }

    /// Takes the read-only layers' state now (changed by the test itself) as their expected state.
    func acceptLayersAsTheyAre() throws {
        try guardUnchanged(Array(readOnly.keys))
    }

    /// The `key: value` lines of the mount's `.stats`.
    func stats() throws -> [String: String] {
        MountFixture.parseStats(try Disk.read(inMount(".stats")))
    }

    /// `.stats` read again through `fd`, a descriptor of it opened before: no lookup, so no
    /// wait for a directory lock that a long rename in the root holds.
    func stats(reading fd: Int32) throws -> [String: String] {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count >= 0 else { throw TestFailure("read .stats: \(String(cString: strerror(errno)))") }
        return MountFixture.parseStats(String(decoding: buffer[..<count], as: UTF8.self))
    }

    static func parseStats(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { result[parts[0]] = parts[1] }
        }
        return result
    }

    /// The number `.stats` gives for `key`; throws when the key is missing or not a number,
    /// so a renamed or dropped figure fails the test instead of passing for any value.
    func figure(_ key: String) throws -> Int {
        let stats = try stats()
        guard let text = stats[key] else { throw TestFailure(".stats has no \(key): \(stats)") }
        guard let value = Int(text) else { throw TestFailure(".stats \(key) is not a number: \(text)") }
        return value
    }

    // MARK: building layers

    /// Processor time of the daemon (all its threads), in clock ticks.
    func processorTicks() throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(daemon)/stat", encoding: .utf8)
        guard let close = stat.lastIndex(of: ")") else { throw TestFailure("no ) in \(stat)") }
        // after the command: state, ppid, ... utime is the 12th field, stime the 13th
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw TestFailure("cannot read times from \(stat)")
        }
        return user + system
    }

    func inMain(_ relative: String) -> String { main + "/" + relative }
    func inSubstitution(_ relative: String) -> String { substitution + "/" + relative }
    func inMount(_ relative: String) -> String { relative.isEmpty ? mountpoint : mountpoint + "/" + relative }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
