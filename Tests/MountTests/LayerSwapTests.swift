import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

/// A swap of the patches (`.layers`) waits for no request in flight, and the requests that
/// start after it see the new layers: each request keeps the view of the stack it began with.
final class LayerSwapTests: XCTestCase {
    /// A request held in flight for as long as the test likes: the main bundle has a
    /// directory `slow` on which a second mount (B) is bound, and B's daemon is stopped, so an
    /// open of a file in `slow` waits inside the daemon under test (its open of the layer's
    /// file waits for B; no cache answers an open). The swap must return meanwhile
    /// (a daemon that made swaps wait for requests hangs here), and what starts after it
    /// must see the new patch.
    func testASwapReturnsWhileARequestIsHeldInFlight() throws {
        let inner = try MountFixture()
        defer { inner.tearDown() }
        try Disk.write(inner.inMain("held.txt"), "held")
        try inner.start()
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let slow = fx.inMain("slow")
        try Disk.mkdir(slow)
        try Disk.write(fx.inMain("a.txt"), "main")
        let patch = fx.root + "/second"
        try Disk.mkdir(patch)
        try Disk.write(patch + "/a.txt", "second")
        guard mount(inner.mountpoint, slow, nil, UInt(MS_BIND), nil) == 0 else {
            throw TestFailure("bind mount: \(String(cString: strerror(errno)))")
        }
        var bound = true
        var stopped = false
        let unbind = {
            if stopped { kill(inner.daemon, SIGCONT) }
            stopped = false
            if bound { _ = umount2(slow, Int32(MNT_DETACH)) }
            bound = false
            try? fx.acceptMainBundleAsItIs()
        }
        defer { unbind() }
        try fx.start()
        var st = stat()
        XCTAssertEqual(stat(fx.inMount("slow/held.txt"), &st), 0, "the bound directory is reachable")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "main")
        guard let connection = MountTable.current().mount(at: inner.mountpoint)?.device.split(separator: ":").last else {
            throw TestFailure("the inner mount is not in the mount table")
        }
        let waiting = "/sys/fs/fuse/connections/\(connection)/waiting"

        kill(inner.daemon, SIGSTOP)
        stopped = true
        // every thread of it stopped (a signal takes effect when a thread next leaves the
        // kernel): from now on nothing it is asked is answered
        let tasks = "/proc/\(inner.daemon)/task"
        try eventually("the inner daemon has stopped") {
            try FileManager.default.contentsOfDirectory(atPath: tasks).allSatisfy { task in
                let stat = (try? String(contentsOfFile: "\(tasks)/\(task)/stat", encoding: .utf8)) ?? ""
                return stat.split(separator: ")").last?.split(separator: " ").first == "T"
            }
        }
        let held = DispatchSemaphore(value: 0)
        let target = fx.inMount("slow/held.txt")
        let outcome = Locked("", rank: .local)
        let lookup = Thread {
            let fd = open(target, O_RDONLY)
            outcome.withLock { $0 = fd >= 0 ? "opened" : "errno \(errno)" }
            if fd >= 0 { close(fd) }
            held.signal()
        }
        lookup.start()
        // the open has reached the stopped daemon: it waits there, in flight in ours
        try eventually("a request waits on the stopped inner mount") {
            (Int((try? Disk.read(waiting))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0) > 0
        }

        let swap = try Spawn.run("/bin/sh", ["-c", "printf '%s\\n' \"$1\" > \"$2\"", "sh", patch, fx.inMount(".layers")],
                                 seconds: 20)
        XCTAssertEqual(swap.status, 0, "the swap returned while a request was in flight: \(swap.error)")
        XCTAssertEqual(held.wait(timeout: .now()), .timedOut, "the held request is still in flight: \(outcome.withLock { $0 })")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "second", "a request after the swap sees the new patch")

        kill(inner.daemon, SIGCONT)
        stopped = false
        XCTAssertEqual(held.wait(timeout: .now() + 20), .success, "the held request finished once the inner daemon ran")
        unbind()
    }

    /// Polls `condition` until it holds, failing after 20 s.
    private func eventually(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(20)
        while try !condition() {
            guard Date() < deadline else { throw TestFailure("timed out waiting until \(what)") }
            usleep(2_000)
        }
    }
}

/// Reads racing swaps between two patches that hold other versions of the same files.
final class LayerSwapReadTests: XCTestCase {
    /// A file the kernel holds (here an O_PATH descriptor, as a path lookup holds it between
    /// its lookup and its open) still opens after a swap made its name lead to another file:
    /// it opens as the file it was, and a new open of the name sees the new patch. Before,
    /// the open answered ESTALE, and a reader racing swaps failed when its retry met a swap
    /// too.
    func testAFileHeldAcrossASwapStillOpensAsItWas() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let one = fx.root + "/one", two = fx.root + "/two"
        for (dir, text) in [(one, "one"), (two, "two-two")] {
            try Disk.mkdir(dir)
            try Disk.write(dir + "/a.txt", text)
        }
        try fx.start(["--patch", one, "-o", "attr_timeout=0"])
        for lookedUpAgain in [false, true] {
            let held = open(fx.inMount("a.txt"), pb_O_PATH)
            XCTAssertGreaterThanOrEqual(held, 0)
            defer { close(held) }
            let next = try Disk.read(fx.inMount(".layers")).contains("patch \(one)") ? two : one
            try Disk.write(fx.inMount(".layers"), next + "\n")
            // a lookup of the name after the swap gives it to a new node first
            let (before, after) = next == one ? ("two-two", "one") : ("one", "two-two")
            if lookedUpAgain { XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), after) }
            try assertHeld(held, isStill: before, "after the swap")
            XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), after, "the new patch's")
        }
    }

    /// The same across swaps between orders of the same patches, which keep the nodes of the
    /// names that resolve alike and mark the others changed: a held file opens and stats as
    /// the file it was after one swap and after more swaps than the views the daemon keeps
    /// (`bench/layers.sh --swaps` saw one read in 15,000 fail with ESTALE: an open between
    /// two swaps that changed its name, the kernel's one retry meeting the second).
    func testAFileHeldAcrossReordersStillOpensAsItWas() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let one = fx.root + "/one", two = fx.root + "/two"
        for (dir, text) in [(one, "one"), (two, "two-two")] {
            try Disk.mkdir(dir + "/d")
            try Disk.write(dir + "/a.txt", text)
            try Disk.write(dir + "/d/b.txt", text)
        }
        try fx.start(["--patch", one, "--patch", two, "-o", "attr_timeout=0"])
        let orders = ["\(one)\n\(two)\n", "\(two)\n\(one)\n"]
        var shown = 0
        for swaps in [1, 2, 5, 9] {
            for name in ["a.txt", "d/b.txt"] {
                let before = try Disk.read(fx.inMount(name))
                let held = open(fx.inMount(name), pb_O_PATH)
                XCTAssertGreaterThanOrEqual(held, 0)
                defer { close(held) }
                for _ in 0..<swaps {
                    shown = 1 - shown
                    try Disk.write(fx.inMount(".layers"), orders[shown])
                }
                let now = try Disk.read(fx.inMount(name))
                XCTAssertEqual(now, swaps % 2 == 0 ? before : (before == "one" ? "two-two" : "one"), "\(name) after \(swaps) swaps")
                try assertHeld(held, isStill: before, "\(name) after \(swaps) swaps")
            }
        }
    }

    /// The patch a held file is in is found by the view its node was resolved in, followed
    /// through the orders since, not by its number: here it is never again where it was, and
    /// the views kept (4) are long gone, where another patch's file has its number.
    func testAFileHeldAcrossManyReordersOpensInItsOwnPatch() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let patches = ["one", "two-two", "three-three"].map { (fx.root + "/" + $0, $0) }
        for (dir, text) in patches { try Disk.mkdir(dir); try Disk.write(dir + "/a.txt", text) }
        try fx.start(patches.flatMap { ["--patch", $0.0] } + ["-o", "attr_timeout=0"])
        let (one, two, three) = (patches[0].0, patches[1].0, patches[2].0)
        let held = open(fx.inMount("a.txt"), pb_O_PATH)
        XCTAssertGreaterThanOrEqual(held, 0)
        defer { close(held) }
        for swap in 0..<9 {
            let order = swap % 2 == 0 ? [two, one, three] : [two, three, one]
            try Disk.write(fx.inMount(".layers"), order.map { $0 + "\n" }.joined())
        }
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "two-two")
        try assertHeld(held, isStill: "one", "after 9 swaps")
    }

    /// `held` (an `O_PATH` descriptor) stats, asking the daemon (the tests mount with
    /// attr_timeout=0, so not from the kernel's cache), and reopens as the file holding `text`.
    private func assertHeld(_ held: Int32, isStill text: String, _ when: String) throws {
        var st = stat()
        XCTAssertEqual(fstat(held, &st), 0, "attributes \(when): errno \(errno)")
        XCTAssertEqual(Int(st.st_size), text.utf8.count, "\(when): the file it was")
        let reopened = open("/proc/self/fd/\(held)", O_RDONLY)
        XCTAssertGreaterThanOrEqual(reopened, 0, "reopened \(when): errno \(errno)")
        if reopened >= 0 {
            XCTAssertEqual(try Disk.readAll(reopened), text, "\(when): the file it was")
            close(reopened)
        }
    }

    /// A swap keeps the patches it lists again as they are: their descriptors are not opened
    /// anew, so repeated swaps (and the few recent views kept) hold no more descriptors.
    func testSwapsKeepTheSamePatchesOpenOnce() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let patches = (0..<50).map { fx.root + "/p\($0)" }
        for patch in patches { try Disk.mkdir(patch) }
        try fx.start(patches.flatMap { ["--patch", $0] })
        func descriptors() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/\(fx.daemon)/fd").count }
        let list = patches.map { $0 + "\n" }.joined()
        try Disk.write(fx.inMount(".layers"), list)
        let before = try descriptors()
        for _ in 0..<8 { try Disk.write(fx.inMount(".layers"), list) }
        XCTAssertLessThanOrEqual(try descriptors(), before + 8, "eight swaps to the same 50 patches")
        XCTAssertEqual(try fx.figure("layers_open"), 52, "the same 50 patches, the substitution and the main bundle")
        try Disk.write(fx.inMount(".layers"), patches.dropFirst(25).map { $0 + "\n" }.joined())
        XCTAssertLessThanOrEqual(try descriptors(), before + 8, "half of them")
        XCTAssertEqual(try fx.figure("layers"), 27, "25 patches, the substitution and the main bundle")
        XCTAssertEqual(try fx.figure("layers_open"), 52, "the 25 patches left out stay open for the views kept")
    }

    /// A swap between orders of the same patches side by side looks at none of them by name:
    /// their directory's entries, read once, still have the patches' inode numbers, and
    /// later its change time says no entry changed (the daemon looks by name again after a
    /// mount or unmount anywhere, which other mounts on a busy machine make now and then: so
    /// at least one of the 20 swaps traced, not all). Counted with strace: before, each swap
    /// made one `fstatat` per patch.
    func testASwapBetweenOrdersOfPatchesSideBySideLooksAtNoneByName() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let patches = (0..<50).map { fx.root + "/p\($0)" }
        for (number, patch) in patches.enumerated() { try Disk.write(patch + "/f\(number % 5).txt", "p\(number)") }
        try fx.start(patches.flatMap { ["--patch", $0] })
        let list = patches.map { $0 + "\n" }.joined(), reversed = patches.reversed().map { $0 + "\n" }.joined()
        try Disk.write(fx.inMount(".layers"), reversed)
        let trace = fx.root + "/strace.out"
        let tracer = try fx.traceDaemon(["-e", "trace=newfstatat,statx,getdents64"], into: trace)
        defer { kill(tracer, SIGKILL); _ = Spawn.wait(tracer, seconds: 10) }
        for swap in 0..<20 { try Disk.write(fx.inMount(".layers"), swap % 2 == 0 ? list : reversed) }
        kill(tracer, SIGINT)
        XCTAssertNotNil(Spawn.wait(tracer, seconds: 10), "strace ended")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        let byName = lines.filter { line in
            (line.contains("newfstatat(") || line.contains("statx(")) && line.contains(#""p"#)
                && patches.contains { line.contains("\"" + ($0 as NSString).lastPathComponent + "\"") }
        }
        XCTAssertGreaterThan(lines.filter { $0.contains("getdents64(") }.count, 0, "the patches' directory was read")
        XCTAssertLessThan(byName.count, 50 * 20, "looked at every patch by name at every swap")
        XCTAssertEqual(try Disk.read(fx.inMount("f0.txt")), "p45", "the last order swapped to")
    }

    /// The same among many patches side by side, which a swap finds by their directory's
    /// entries and then by its change time: one renamed away and another directory made at
    /// its path between two swaps is opened anew, in either order.
    func testAPatchReplacedAmongManySideBySideIsOpenedAnew() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let patches = (0..<12).map { fx.root + "/p\($0)" }
        for (number, patch) in patches.enumerated() { try Disk.write(patch + "/p\(number).txt", "p\(number)") }
        try Disk.write(patches[0] + "/a.txt", "p0")
        try fx.start(patches.flatMap { ["--patch", $0] })
        let list = patches.map { $0 + "\n" }.joined(), reversed = patches.reversed().map { $0 + "\n" }.joined()
        for swap in 0..<4 { try Disk.write(fx.inMount(".layers"), swap % 2 == 0 ? reversed : list) }
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "p0")
        XCTAssertEqual(rename(patches[0], fx.root + "/p0-before"), 0)
        try Disk.write(patches[0] + "/a.txt", "p0, replaced")
        try Disk.write(fx.inMount(".layers"), reversed)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "p0, replaced")
        XCTAssertEqual(Disk.lstatError(fx.inMount("p0.txt")), ENOENT, "the directory renamed away is not a layer")
        try Disk.write(fx.inMount(".layers"), list)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "p0, replaced", "the new directory, kept")
    }

    /// A patch listed by a symlink among many side by side is looked at through the link at
    /// each swap: the directory it leads to, replaced on disk, is opened anew, though the
    /// symlink's own directory did not change.
    func testAPatchListedBySymlinkIsOpenedAnewWhenItsTargetIsReplaced() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let patches = (0..<12).map { fx.root + "/p\($0)" }
        let target = fx.root + "/releases/current"
        try Disk.write(target + "/a.txt", "old release")
        XCTAssertEqual(symlink(target, patches[0]), 0)
        for (number, patch) in patches.enumerated().dropFirst() { try Disk.write(patch + "/p\(number).txt", "p\(number)") }
        try fx.start(patches.flatMap { ["--patch", $0] })
        let list = patches.map { $0 + "\n" }.joined(), reversed = patches.reversed().map { $0 + "\n" }.joined()
        for swap in 0..<4 { try Disk.write(fx.inMount(".layers"), swap % 2 == 0 ? reversed : list) }
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "old release")
        XCTAssertEqual(rename(target, fx.root + "/releases/before"), 0)
        try Disk.write(target + "/a.txt", "new release")
        try Disk.write(fx.inMount(".layers"), reversed)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "new release")
        try Disk.write(fx.inMount(".layers"), list)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "new release")
    }

    /// A patch is kept across a swap only while its path names the directory it was opened
    /// at: a directory put in its place on disk (the old one renamed away) is opened anew,
    /// also in a list of the same paths in another order, which is otherwise taken as it is.
    /// The patches lie side by side, as the daemon looks at them from one descriptor of
    /// their directory.
    func testAPatchReplacedAtItsPathIsOpenedAnew() throws {
        let fx = try MountFixture()
        defer { fx.tearDown() }
        let one = fx.root + "/one", two = fx.root + "/two"
        for (dir, text) in [(one, "one"), (two, "two")] {
            try Disk.mkdir(dir)
            try Disk.write(dir + "/a.txt", text)
        }
        try fx.start(["--patch", one, "--patch", two])
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "one")
        try Disk.write(fx.inMount(".layers"), "\(two)\n\(one)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "two")
        XCTAssertEqual(rename(one, fx.root + "/one-before"), 0)
        try Disk.mkdir(one)
        try Disk.write(one + "/a.txt", "one, replaced")
        try Disk.write(fx.inMount(".layers"), "\(one)\n\(two)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "one, replaced")
        XCTAssertEqual(try fx.figure("layers"), 4, "two patches, the substitution and the main bundle")
        try Disk.write(fx.inMount(".layers"), "\(two)\n\(one)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "two")
        try Disk.write(fx.inMount(".layers"), "\(one)\n\(two)\n")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "one, replaced", "the new directory, kept")
    }
}
