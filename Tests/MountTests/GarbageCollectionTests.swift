import Foundation
import XCTest

/// `gc` with live mounts: a layer a mount uses, or a recent history entry names, stays;
/// what nothing names goes, with its blobs and image records.
final class GarbageCollectionTests: RegistryTestCase {
    /// A second mount, of another main bundle.
    var other: MountFixture!

    override func setUpWithError() throws {
        try super.setUpWithError()
        other = try MountFixture(name + "Other")
    }

    override func tearDown() {
        other?.stop()
        other?.tearDown()
        super.tearDown()
    }

    func run(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run(MountFixture.binary, arguments + ["--store", store] + (arguments[0] == "gc" ? [] : ["--tls-verify=false"]))
    }

    /// Three versions over one base layer; returns their references and layer blob digests.
    func pushThreeVersions() throws -> (references: [String], fixBlobs: [String]) {
        let base = fx.root + "/src-base", fix = fx.root + "/src-fix"
        try Disk.write(base + "/base.txt", "base")
        let baseTar = try TestImage.tar(of: base)
        let layout = fx.root + "/layout"
        let image = try TestImage(layout: layout)
        var references: [String] = [], blobs: [String] = []
        for version in 1...3 {
            try Disk.write(fix + "/version", "v\(version)")
            let fixTar = try TestImage.tar(of: fix)
            try image.add(tag: "v\(version)", [(baseTar, .gzip), (fixTar, .gzip)])
            blobs.append(TestImage.digest(try TestImage.compress(fixTar, .gzip)))
            let reference = "\(registry.host)/app:v\(version)"
            let copied = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "oci:\(layout):v\(version)", "docker://" + reference])
            guard copied.status == 0 else { throw TestFailure("skopeo copy: \(copied.error)") }
            references.append(reference)
        }
        return (references, blobs)
    }

    func blobExists(_ digest: String) -> Bool { Disk.lstat(store + "/oci/blobs/sha256/" + digest.dropFirst(7)) != nil }

    func testGCKeepsWhatMountsAndRecentHistoryUseAndRemovesTheRest() throws {
        let (references, fixBlobs) = try pushThreeVersions()
        try fx.start()
        for reference in references.prefix(2) {
            let set = try run(["layers", fx.mountpoint, "--set-image", reference])
            XCTAssertEqual(set.status, 0, set.error)
        }
        // another mount uses v1's layers directly; v3 is pulled and used by nothing
        let v1 = try run(["pull", references[0]]).output.split(separator: "\n").map(String.init)
        try other.start(v1.flatMap { ["--patch", $0] })
        let v3 = try run(["pull", references[2]]).output.split(separator: "\n").map(String.init)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256").count, 4, "a base and three fixes")

        let first = try run(["gc", "--keep", "1"])
        XCTAssertEqual(first.status, 0, first.error)
        XCTAssertTrue(first.output.hasPrefix("removed 1 layers"), first.output)
        XCTAssertNil(Disk.lstat(v3[0]), "v3's own layer: nothing uses it")
        XCTAssertNotNil(Disk.lstat(v3[1]), "the base layer: both mounts use it")
        XCTAssertNotNil(Disk.lstat(v1[0]), "v1's layer: the other mount uses it")
        XCTAssertFalse(blobExists(fixBlobs[2]))
        XCTAssertTrue(blobExists(fixBlobs[0]) && blobExists(fixBlobs[1]))
        XCTAssertEqual(try Disk.read(other.inMount("version")), "v1")
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "v2")

        other.stop()
        let second = try run(["gc", "--keep", "1"])
        XCTAssertEqual(second.status, 0, second.error)
        XCTAssertNil(Disk.lstat(v1[0]), "v1's layer: no mount uses it, and it is not in the last history entry")
        XCTAssertFalse(blobExists(fixBlobs[0]))
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "v2")
        XCTAssertEqual(try Disk.read(fx.inMount("base.txt")), "base")
        let back = try run(["layers", fx.mountpoint, "--rollback"])
        XCTAssertEqual(back.status, 1)
        XCTAssertTrue(back.error.contains("is no longer in the store"), back.error)
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "v2")
        // pulled again, v1 is whole again (its blobs fetched anew)
        XCTAssertEqual(try run(["pull", references[0]]).status, 0)
        XCTAssertEqual(try run(["layers", fx.mountpoint, "--rollback"]).status, 0)
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "v1")
    }

    /// An image of one layer made of `files` (path: text), pushed as `tag`; its reference.
    func pushOneLayer(_ tag: String, _ files: [String: String]) throws -> String {
        let source = fx.root + "/src-" + tag
        for (path, text) in files { try Disk.write(source + "/" + path, text) }
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: tag, [(try TestImage.tar(of: source), .gzip)])
        let reference = "\(registry.host)/one:\(tag)"
        let copied = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "oci:\(layout):\(tag)", "docker://" + reference])
        guard copied.status == 0 else { throw TestFailure("skopeo copy: \(copied.error)") }
        return reference
    }

    /// Pushes a one-layer image of `files` as `tag`, pulls it, and returns the layer's path.
    func pulledLayer(_ tag: String, _ files: [String: String]) throws -> String {
        let pulled = try run(["pull", try pushOneLayer(tag, files)])
        guard pulled.status == 0 else { throw TestFailure("pull \(tag): \(pulled.error)") }
        return pulled.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A mount whose patch is a directory inside a store's layer (`--patch LAYER/Payload`)
    /// uses that layer: gc keeps it, even with no history to name it.
    func testGCKeepsALayerWhoseSubdirectoryIsAPatch() throws {
        let layer = try pulledLayer("sub", ["Payload/strings.txt": "from the layer"])
        try fx.start([], patches: [layer + "/Payload"])
        let gc = try run(["gc", "--keep", "0"])
        XCTAssertEqual(gc.status, 0, gc.error)
        XCTAssertTrue(gc.output.hasPrefix("removed 0 layers"), gc.output)
        XCTAssertNotNil(Disk.lstat(layer + "/Payload/strings.txt"), "the layer the mount uses is kept")
        XCTAssertEqual(try Disk.read(fx.inMount("strings.txt")), "from the layer")
    }

    /// gc reads the live mounts once it holds the store's lock: a mount switched to another
    /// layer while gc waited for the lock keeps that layer.
    func testGCSeesAMountSwitchedWhileItWaitedForTheLock() throws {
        let oldLayer = try pulledLayer("old", ["version": "old"])
        let newLayer = try pulledLayer("new", ["version": "new"])
        try fx.start([], patches: [oldLayer])

        let lock = open(store + "/lock", O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(lock, 0)
        defer { if lock >= 0 { close(lock) } }
        XCTAssertEqual(flock(lock, LOCK_EX), 0)
        let output = fx.root + "/gc.out"
        let gc = try Spawn.start(MountFixture.binary, ["gc", "--keep", "0", "--store", store], stderrPath: output, stdoutPath: output)
        defer { if Spawn.exited(gc) == nil { kill(gc, SIGKILL); _ = Spawn.wait(gc, seconds: 5) } }
        try eventually("gc waits for the store's lock") { GarbageCollectionTests.waitsForLock(gc) }
        // switched directly, as an updater's `layers --set` does: no store lock taken
        let set = try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint, "--set", newLayer])
        XCTAssertEqual(set.status, 0, set.error)
        flock(lock, LOCK_UN)
        XCTAssertEqual(Spawn.wait(gc, seconds: 30), 0, (try? Disk.read(output)) ?? "")
        XCTAssertNotNil(Disk.lstat(newLayer + "/version"), "the layer the mount uses now is kept")
        XCTAssertNil(Disk.lstat(oldLayer), "the layer it used before is gone")
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "new")
    }

    /// A mount that starts, or is set to a store's layer, while gc reads the mounts and removes
    /// layers (it holds `in-use.lock`) waits for it: the mount fails cleanly when gc removed
    /// its layer, rather than coming up with a layer removed under it.
    func testMountsStartingOrSwitchedWhileGCRemovesLayersWaitForIt() throws {
        let firstLayer = try pulledLayer("first", ["version": "first"])
        let secondLayer = try pulledLayer("second", ["version": "second"])
        let lockPath = store + "/in-use.lock"
        let lock = open(lockPath, O_RDWR | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(lock, 0, "pull makes the store's in-use lock")
        defer { if lock >= 0 { close(lock) } }
        let inode = Disk.lstat(lockPath)?.st_ino ?? 0

        // as gc: the lock held while the layer goes
        XCTAssertEqual(flock(lock, LOCK_EX), 0)
        let started = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let fixture = fx!  // used by that thread alone until it signals
        let outcome = Flag()
        DispatchQueue.global().async {
            do { try fixture.start([], patches: [firstLayer]); outcome.set("mounted") } catch { outcome.set("\(error)") }
            started.signal()
        }
        try eventually("the daemon waits for gc") { GarbageCollectionTests.someoneWaits(forLockOn: inode) }
        XCTAssertFalse(fx.isMounted)
        try FileManager.default.removeItem(atPath: firstLayer)
        flock(lock, LOCK_UN)
        started.wait()
        XCTAssertTrue(outcome.value?.contains("cannot open the layers") == true, outcome.value ?? "")

        // a mount set to a layer while gc runs: the command waits, then sets it
        try fx.start()
        XCTAssertEqual(flock(lock, LOCK_EX), 0)
        let output = fx.root + "/set.out"
        let set = try Spawn.start(MountFixture.binary, ["layers", fx.mountpoint, "--set", secondLayer], stderrPath: output, stdoutPath: output)
        defer { if Spawn.exited(set) == nil { kill(set, SIGKILL); _ = Spawn.wait(set, seconds: 5) } }
        try eventually("layers --set waits for gc") { GarbageCollectionTests.someoneWaits(forLockOn: inode) }
        XCTAssertNil(Disk.lstat(fx.inMount("version")), "not set while gc runs")
        flock(lock, LOCK_UN)
        XCTAssertEqual(Spawn.wait(set, seconds: 30), 0, (try? Disk.read(output)) ?? "")
        XCTAssertEqual(try Disk.read(fx.inMount("version")), "second")
    }

    /// Whether process `pid` waits for a file lock (a `->` line of /proc/locks).
    static func waitsForLock(_ pid: pid_t) -> Bool {
        let locks = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
        return locks.split(separator: "\n").contains { line in
            let words = line.split(separator: " ")
            return words.count > 5 && words[1] == "->" && words[5] == "\(pid)"
        }
    }

    /// Whether a process waits for a lock on the file with inode `inode` (`->` lines of
    /// /proc/locks name the file as MAJOR:MINOR:INODE).
    static func someoneWaits(forLockOn inode: ino_t) -> Bool {
        let locks = (try? String(contentsOfFile: "/proc/locks", encoding: .utf8)) ?? ""
        return locks.split(separator: "\n").contains { line in
            let words = line.split(separator: " ")
            return words.count > 6 && words[1] == "->" && words[6].split(separator: ":").last == "\(inode)"
        }
    }
}
