import Foundation
import ProxyBundleCore
import XCTest

/// Updaters change the substitution directory directly, with whatever tool they like, while it
/// is mounted and in use. After each usual way of doing it and `.invalidate`, the view equals
/// kernel overlayfs of the layers as they now are, and writing through the mount works and
/// lands in the substitution.
final class UpdaterTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    // MARK: the versions

    /// A generated main bundle under `gen/` with a generated first version of the patch in the
    /// substitution, and `updater/` in the main bundle only, for the writes through the mount.
    private func makeLayers() throws {
        var generator = OverlayScenario.Generator(seed: 0x0bda_7e00)
        let tree = try generator.buildMain(fx.main + "/gen")
        try generator.buildLayer(fx.substitution + "/gen", over: tree)
        for round in 0..<2 {
            for name in ["append-\(round).txt", "remove-\(round).txt"] { try Disk.write(fx.inMain("updater/" + name), "main \(name)\n") }
        }
        try Disk.write(fx.inMain("open.txt"), "opened before the update\n")
    }

    /// The next version of the substitution, made from the current one: a third of its files
    /// rewritten, some removed, new files and a new directory, a whiteout added and one
    /// removed, a directory made opaque.
    private func nextVersion() throws -> String {
        let next = fx.root + "/next"
        let copy = try Spawn.run("/bin/cp", ["-a", fx.substitution, next])
        guard copy.status == 0 else { throw TestFailure("cp -a: \(copy.error)") }
        try? FileManager.default.removeItem(atPath: next + "/.wh..wh.work")
        let files = try OverlayTree.walk(next).filter { $0.value.type == "file" && !$0.key.isEmpty }.keys.sorted()
        for (index, path) in files.enumerated() {
            let name = (path as NSString).lastPathComponent
            if name.hasPrefix(".wh.") {
                if index % 4 == 0 && name != ".wh..wh..opq" { try FileManager.default.removeItem(atPath: next + "/" + path) }
            } else if index % 3 == 0 {
                try Disk.write(next + "/" + path, "version 2 of \(path)\n")
            } else if index % 7 == 1 {
                try FileManager.default.removeItem(atPath: next + "/" + path)
            }
        }
        try Disk.write(next + "/gen/added-in-v2.txt", "new in version 2\n")
        try Disk.write(next + "/gen/v2-dir/inside.txt", "a new directory\n")
        let mainFiles = try Disk.list(fx.inMain("gen")).filter { Disk.lstat(next + "/gen/" + $0) == nil }
        if let hidden = mainFiles.first { try Disk.whiteout(next + "/gen", hidden) }
        let directories = try Disk.list(next + "/gen").filter { name in
            Disk.lstat(next + "/gen/" + name).map { ($0.st_mode & S_IFMT) == S_IFDIR } ?? false
        }
        if let opaque = directories.sorted().last { try Disk.opaque(next + "/gen/" + opaque) }
        return next
    }

    /// Reads everything through the mount: every name, attribute and content cached.
    private func warm() throws {
        _ = try OverlayTree.walk(fx.mountpoint)
    }

    private func invalidate() throws {
        try Disk.write(fx.inMount(".invalidate"), "\n")
    }

    private var checks = 0

    /// The mount against a fresh kernel overlay of the substitution over the main bundle.
    private func assertMatchesKernel(_ label: String, file: StaticString = #filePath, line: UInt = #line) throws {
        checks += 1
        let kernel = fx.root + "/kernel-\(checks)"
        try KernelOverlay.mountStack([fx.substitution, fx.main], at: kernel, scratch: fx.root + "/converted-\(checks)")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel, label: label + ": ", file: file, line: line)
    }

    /// A copy-up, a create and a removal of a main-bundle name through the mount (each of
    /// `round`'s own names), and where they landed.
    private func writeThrough(_ label: String, round: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let appended = fx.inMount("updater/append-\(round).txt")
        let fd = open(appended, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, "\(label): open for append: errno \(errno)", file: file, line: line)
        if fd >= 0 {
            XCTAssertEqual(write(fd, "+\n", 2), 2, "\(label): append: errno \(errno)", file: file, line: line)
            close(fd)
        }
        try Disk.write(fx.inMount("updater/new-\(round).txt"), "made through the mount\n")
        XCTAssertEqual(unlink(fx.inMount("updater/remove-\(round).txt")), 0, "\(label): unlink: errno \(errno)",
                       file: file, line: line)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("updater/append-\(round).txt")), "main append-\(round).txt\n+\n", label,
                       file: file, line: line)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("updater/new-\(round).txt")), "made through the mount\n", label,
                       file: file, line: line)
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("updater/.wh.remove-\(round).txt")), "\(label): the whiteout", file: file, line: line)
    }

    /// Warm mount in use, `update`, `.invalidate`, the kernel's view, writes, the kernel's
    /// view again; a file opened before the update keeps reading.
    private func exercise(_ label: String, _ update: (_ next: String) throws -> Void) throws {
        try makeLayers()
        try fx.start()
        try warm()
        try writeThrough(label + ", before", round: 0)  // the work directory exists now
        let opened = open(fx.inMount("open.txt"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(opened, 0)
        defer { close(opened) }
        try update(try nextVersion())
        try invalidate()
        try assertMatchesKernel(label + ", after the update")
        try writeThrough(label, round: 1)
        try assertMatchesKernel(label + ", after writes through the mount")
        XCTAssertEqual(try Disk.readAll(opened), "opened before the update\n")
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
    }

    private func shell(_ command: String) throws {
        let result = try Spawn.run("/bin/sh", ["-c", command])
        XCTAssertEqual(result.status, 0, "\(command): \(result.error)")
    }

    // MARK: updater styles

    /// Before the fix: rsync --delete removed the work directory, and every copy-up failed
    /// with ENOENT until a remount.
    func testRsyncDelete() throws {
        try exercise("rsync -a --delete") { next in try shell("rsync -a --delete '\(next)/' '\(fx.substitution)/'") }
    }

    func testRsyncWithoutDelete() throws {
        try exercise("rsync -a") { next in try shell("rsync -a '\(next)/' '\(fx.substitution)/'") }
    }

    func testCpArchiveOverTheOldContent() throws {
        try exercise("cp -a") { next in try shell("cp -a '\(next)/.' '\(fx.substitution)/'") }
    }

    func testTarExtractOverTheOldContent() throws {
        try exercise("tar -x") { next in
            try shell("tar -C '\(next)' -cf '\(fx.root)/next.tar' . && tar -x -C '\(fx.substitution)' -f '\(fx.root)/next.tar'")
        }
    }

    func testWipeAndCopy() throws {
        try exercise("find -delete; cp -a") { next in
            try shell("find '\(fx.substitution)' -mindepth 1 -delete && cp -a '\(next)/.' '\(fx.substitution)/'")
        }
    }

    func testSwapByRename() throws {
        try exercise("mv; mv") { next in
            try shell("mv '\(fx.substitution)' '\(fx.substitution).old' && mv '\(next)' '\(fx.substitution)'")
        }
        XCTAssertNil(Disk.lstat(fx.substitution + ".old/.wh..wh.work"), "the old directory keeps nothing of the daemon's")
    }

    func testRemoveAndRecreate() throws {
        try exercise("rm -rf; mkdir; cp -a") { next in
            try shell("rm -rf '\(fx.substitution)' && mkdir '\(fx.substitution)' && cp -a '\(next)/.' '\(fx.substitution)/'")
        }
    }

    /// The reproduction of the issue, step by step.
    func testWorkDirectoryRemovedBehindTheDaemonIsMadeAgain() throws {
        try Disk.write(fx.inMain("first"), "main\n")
        try Disk.write(fx.inMain("second"), "main\n")
        try fx.start()
        try Disk.write(fx.inMount("first"), "copied up\n")
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution(".wh..wh.work")), "fixture: the work directory exists")
        try shell("rm -rf '\(fx.inSubstitution(".wh..wh.work"))'")
        try invalidate()
        let fd = open(fx.inMount("second"), O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, "errno \(errno)")
        XCTAssertEqual(write(fd, "x\n", 2), 2)
        close(fd)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("second")), "main\nx\n")
    }

    // MARK: a substitution removed

    /// Removed and not replaced: reads go on from the main bundle, every change answers EROFS
    /// with one warning in the log; once a directory is back, `.invalidate` resumes with it.
    func testRemovedSubstitutionServesReadsRefusesChangesAndResumes() throws {
        try Disk.write(fx.inMain("m.txt"), "main\n")
        try Disk.mkdir(fx.inMain("dir"))
        try Disk.write(fx.inSubstitution("s.txt"), "substitution\n")
        try fx.start()
        try warm()
        try shell("rm -rf '\(fx.substitution)'")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("m.txt")), "main\n")
        XCTAssertEqual(Disk.lstatError(fx.inMount("s.txt")), ENOENT)
        for round in 0..<5 {
            XCTAssertEqual(open(fx.inMount("m.txt"), O_WRONLY | O_APPEND), -1)
            XCTAssertEqual(errno, EROFS, "copy-up \(round)")
            XCTAssertEqual(open(fx.inMount("new-\(round)"), O_WRONLY | O_CREAT, 0o644), -1)
            XCTAssertEqual(errno, EROFS, "create \(round)")
            XCTAssertEqual(mkdir(fx.inMount("dir-\(round)"), 0o755), -1)
            XCTAssertEqual(errno, EROFS, "mkdir \(round)")
            XCTAssertEqual(unlink(fx.inMount("m.txt")), -1)
            XCTAssertEqual(errno, EROFS, "unlink \(round)")
            XCTAssertEqual(rename(fx.inMount("dir"), fx.inMount("moved")), -1)
            XCTAssertEqual(errno, EROFS, "rename \(round)")
            XCTAssertEqual(chmod(fx.inMount("m.txt"), 0o600), -1)
            XCTAssertEqual(errno, EROFS, "chmod \(round)")
        }
        let warnings = fx.log.split(separator: "\n").filter { $0.contains("was removed") }
        XCTAssertEqual(warnings.count, 1, fx.log)
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
        try Disk.mkdir(fx.substitution)
        try invalidate()
        try Disk.write(fx.inMount("new.txt"), "after\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("new.txt")), "after\n")
        try Disk.write(fx.inMount("m.txt"), "changed\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("m.txt")), "changed\n")
    }

    // MARK: a racing writer

    /// An updater replaces a file (a new file renamed over it, as rsync and cp --remove-destination
    /// do) while a program rewrites the same path through the mount: no error, and the file is
    /// always one of the two whole. The last to finish wins; a descriptor opened before the
    /// updater's rename writes the replaced file, which is gone.
    func testUpdaterReplacingAFileWhileAProgramWritesItThroughTheMount() throws {
        try Disk.write(fx.inMain("race.txt"), "main\n")
        try fx.start()
        let size = 64 << 10
        let ours = String(repeating: "A", count: size), theirs = String(repeating: "B", count: size)
        let errors = Locked<[String]>([], rank: .local)
        let mounted = fx.inMount("race.txt"), replaced = fx.inSubstitution("race.txt"), temporary = fx.inSubstitution(".race.tmp")
        let writerDone = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            defer { writerDone.signal() }
            for round in 0..<300 {
                let fd = open(mounted, O_WRONLY | O_TRUNC)
                guard fd >= 0 else { errors.withLock { $0.append("open \(round): errno \(errno)") }; continue }
                let written = ours.withCString { write(fd, $0, size) }
                if written != size { errors.withLock { $0.append("write \(round): \(written), errno \(errno)") } }
                close(fd)
            }
        }
        DispatchQueue.global().async {
            defer { done.signal() }
            for round in 0..<300 {
                do {
                    try Disk.write(temporary, theirs)
                    if rename(temporary, replaced) != 0 { errors.withLock { $0.append("rename \(round): errno \(errno)") } }
                } catch {
                    errors.withLock { $0.append("updater \(round): \(error)") }
                }
            }
        }
        XCTAssertEqual(writerDone.wait(timeout: .now() + 120), .success, "the writer hangs")
        XCTAssertEqual(done.wait(timeout: .now() + 120), .success, "the updater hangs")
        XCTAssertEqual(errors.withLock { $0 }, [])
        try invalidate()
        let content = try Disk.read(fx.inMount("race.txt"))
        XCTAssertTrue(content == ours || content == theirs, "half of one and half of the other: \(content.prefix(20))... "
                          + "\(content.filter { $0 == "A" }.count) A, \(content.filter { $0 == "B" }.count) B")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("race.txt")), content)
        XCTAssertFalse(fx.log.contains(": EIO"), fx.log)
    }

    // MARK: nothing of the daemon's

    /// A clean unmount leaves the substitution as the changes through the mount made it: no
    /// work directory, the root's times as they were.
    func testCleanUnmountLeavesNothingOfTheDaemonsInTheSubstitution() throws {
        try Disk.write(fx.inMain("dir/file"), "main\n")
        try Disk.mkdir(fx.inSubstitution("dir"))
        try fx.start()
        try Disk.write(fx.inMount("dir/file"), "copied up\n")
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution(".wh..wh.work")), "fixture: the work directory exists while mounted")
        let root = try XCTUnwrap(Disk.lstat(fx.substitution))
        XCTAssertEqual(fx.stop(), 0)
        XCTAssertEqual(try Disk.list(fx.substitution), ["dir"])
        XCTAssertEqual(Disk.lstat(fx.substitution)?.st_mtim.tv_nsec, root.st_mtim.tv_nsec)
        XCTAssertEqual(Disk.lstat(fx.substitution)?.st_mtim.tv_sec, root.st_mtim.tv_sec)
    }

    /// Mounting, reading and unmounting change nothing in the substitution, read-write or
    /// `-o ro`: not even the root's change time.
    func testMountsThatChangeNothingLeaveTheSubstitutionUntouched() throws {
        try Disk.write(fx.inMain("a/file"), "main\n")
        try Disk.write(fx.inSubstitution("a/patched"), "patch\n")
        for options in [[], ["-o", "ro"]] {
            let before = try TreeChecksum.of(fx.substitution)
            try fx.start(options)
            try warm()
            if options.isEmpty {
                XCTAssertEqual(unlink(fx.inMount("missing")), -1)
            } else {
                XCTAssertEqual(open(fx.inMount("a/file"), O_WRONLY), -1)
                XCTAssertEqual(errno, EROFS)
            }
            XCTAssertEqual(fx.stop(), 0)
            XCTAssertEqual(try TreeChecksum.of(fx.substitution), before, "\(options)")
        }
    }

    // MARK: between the change and `.invalidate`

    /// A name a lookup denies is not listed, though a layer gained it behind the daemon's back,
    /// until an invalidation brings both up to date. Before the fix: `ls` listed LATER while
    /// `ls -l` could not stat it (`-????????? LATER`).
    func testAListingNeverShowsANameALookupDenies() throws {
        try Disk.write(fx.inMain("sub/m"), "main\n")
        try fx.start()
        try Disk.write(fx.inMount("sub/x"), "")
        XCTAssertEqual(Disk.lstatError(fx.inMount("sub/LATER")), ENOENT)
        try Disk.write(fx.inSubstitution("sub/LATER"), "dropped in\n")
        try Disk.write(fx.inMount("sub/y"), "")  // the kernel reads the listing again
        let listed = try Disk.list(fx.inMount("sub")).sorted()
        for name in listed {
            XCTAssertNotNil(Disk.lstat(fx.inMount("sub/" + name)), "\(name) is listed but cannot be reached")
        }
        XCTAssertEqual(listed, ["m", "x", "y"])
        let long = try Spawn.run("/bin/ls", ["-l", fx.inMount("sub")])
        XCTAssertEqual(long.status, 0, long.error)
        XCTAssertFalse(long.output.contains("?"), long.output)
        try invalidate()
        XCTAssertEqual(try Disk.list(fx.inMount("sub")).sorted(), ["LATER", "m", "x", "y"])
        XCTAssertEqual(try Disk.read(fx.inMount("sub/LATER")), "dropped in\n")
    }

    // MARK: -o watch

    /// With `-o watch`, a file dropped into the substitution (or changed there) shows through
    /// the mount by itself once the change settles; without it, only after `.invalidate`.
    func testWatchShowsChangesInTheLayersWithoutInvalidate() throws {
        try Disk.write(fx.inMain("Images/icon.png"), "main icon\n")
        try Disk.mkdir(fx.inSubstitution("Images"))
        try fx.start(["-o", "watch"])
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icon.png")), "main icon\n")
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new.png")), ENOENT)
        var delays: [Double] = []
        for round in 0..<3 {
            // cached first: the missing name and the icon's inode
            XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new-\(round).png")), ENOENT)
            XCTAssertNotNil(try? Disk.read(fx.inMount("Images/icon.png")))
            let start = Date()
            try Disk.write(fx.inSubstitution("Images/.icon.tmp"), "designer's icon \(round)\n")
            XCTAssertEqual(rename(fx.inSubstitution("Images/.icon.tmp"), fx.inSubstitution("Images/icon.png")), 0)
            try Disk.write(fx.inSubstitution("Images/new-\(round).png"), "new\n")
            var seen = false
            while Date().timeIntervalSince(start) < 10 {
                if (try? Disk.read(fx.inMount("Images/icon.png"))) == "designer's icon \(round)\n",
                   Disk.lstat(fx.inMount("Images/new-\(round).png")) != nil {
                    seen = true
                    break
                }
                usleep(10_000)
            }
            XCTAssertTrue(seen, "round \(round): not visible after 10 s")
            delays.append(Date().timeIntervalSince(start))
        }
        print("-o watch: a change visible after " + delays.map { String(format: "%.3f s", $0) }.joined(separator: ", "))
        XCTAssertEqual(try fx.stats()["watch"], "on")
        XCTAssertGreaterThanOrEqual(try fx.figure("automatic_invalidations"), 3)
        XCTAssertEqual(try fx.stats()["invalidations"], try fx.stats()["automatic_invalidations"], "no .invalidate written")
    }

    func testWithoutWatchChangesWaitForInvalidate() throws {
        try Disk.write(fx.inMain("Images/icon.png"), "main icon\n")
        try Disk.mkdir(fx.inSubstitution("Images"))
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icon.png")), "main icon\n")
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new.png")), ENOENT)
        try Disk.write(fx.inSubstitution("Images/icon.png"), "designer's icon\n")
        try Disk.write(fx.inSubstitution("Images/new.png"), "new\n")
        // no time to wait for: nothing may watch the layers (watch off, no automatic
        // invalidation), and the kernel forgets what it cached, so the next looks ask the
        // daemon, whose view is what stays old
        try Handles.dropKernelCaches()
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new.png")), ENOENT, "the old view until .invalidate")
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icon.png")), "main icon\n", "the old view until .invalidate")
        XCTAssertEqual(try fx.stats()["watch"], "off")
        XCTAssertEqual(try fx.figure("automatic_invalidations"), 0)
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icon.png")), "designer's icon\n")
    }
}
