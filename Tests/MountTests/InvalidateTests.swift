import Foundation
import XCTest

/// Changes made on disk behind the daemon's back become visible exactly when a write to
/// `.invalidate` returns: no sleep, no retry. Each test first warms every cache (lookups,
/// reads, listings), then changes the layers directly, then invalidates.
class InvalidateTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    /// Reads, stats and lists everything below `relative` through the mount.
    func warm(_ relative: String = "") throws {
        let path = fx.inMount(relative)
        guard let st = Disk.lstat(path) else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            for name in try Disk.list(path) { try warm(relative.isEmpty ? name : relative + "/" + name) }
        } else if st.st_mode & S_IFMT == S_IFREG {
            _ = try Disk.read(path)
        }
    }

    func invalidate(_ text: String = "") throws {
        let fd = open(fx.inMount(".invalidate"), O_WRONLY | O_TRUNC)
        guard fd >= 0 else { throw TestFailure("open .invalidate: errno \(errno)") }
        defer { close(fd) }
        let bytes = Array((text + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { throw TestFailure("write .invalidate: errno \(errno)") }
    }

    func testNewFileAppearsAfterInvalidation() throws {
        try Disk.write(fx.inMain("Images/a.png"), "a")
        try fx.start()
        try warm()
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new.png")), ENOENT)
        try Disk.write(fx.inSubstitution("Images/new.png"), "new")
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/new.png")), ENOENT, "the cached view holds until invalidation")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("Images/new.png")), "new")
        XCTAssertEqual(try Disk.list(fx.inMount("Images")).sorted(), ["a.png", "new.png"])
    }

    func testFileChangedWithSameSizeAndTimeShowsNewContent() throws {
        try Disk.write(fx.inSubstitution("strings.json"), "AAAA")
        try fx.start()
        try warm()
        // an open file keeps the kernel's inode, and with it the cached pages
        let held = open(fx.inMount("strings.json"), O_RDONLY)
        defer { close(held) }
        XCTAssertGreaterThanOrEqual(held, 0)
        let before = try XCTUnwrap(Disk.lstat(fx.inSubstitution("strings.json")))
        let fd = open(fx.inSubstitution("strings.json"), O_WRONLY)
        XCTAssertEqual(pwrite(fd, "BBBB", 4, 0), 4)
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(futimens(fd, &times), 0)
        close(fd)
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("strings.json")), "BBBB")
    }

    func testDeletedSubstitutionFileUncoversTheMainFile() throws {
        try Disk.write(fx.inMain("a.txt"), "main")
        try Disk.write(fx.inSubstitution("a.txt"), "patch")
        try fx.start()
        try warm()
        XCTAssertEqual(unlink(fx.inSubstitution("a.txt")), 0)
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "main")
        XCTAssertEqual(Disk.lstat(fx.inMount("a.txt"))?.st_size, 4)
    }

    func testNewWhiteoutHidesAndRemovedWhiteoutShows() throws {
        try Disk.write(fx.inMain("dir/gone.txt"), "main")
        try Disk.write(fx.inMain("dir/back.txt"), "main")
        try Disk.whiteout(fx.inSubstitution("dir"), "back.txt")
        try fx.start()
        try warm()
        XCTAssertEqual(try Disk.list(fx.inMount("dir")), ["gone.txt"])
        try Disk.whiteout(fx.inSubstitution("dir"), "gone.txt")
        XCTAssertEqual(unlink(fx.inSubstitution("dir/.wh.back.txt")), 0)
        try invalidate()
        XCTAssertEqual(Disk.lstatError(fx.inMount("dir/gone.txt")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("dir/back.txt")), "main")
        XCTAssertEqual(try Disk.list(fx.inMount("dir")), ["back.txt"])
    }

    func testNewDirectoryWithContentsAndNewOpaqueMarker() throws {
        try Disk.write(fx.inMain("res/old.txt"), "old")
        try fx.start()
        try warm()
        XCTAssertEqual(Disk.lstatError(fx.inMount("fresh")), ENOENT)
        try Disk.write(fx.inSubstitution("fresh/deep/file.txt"), "deep")
        try Disk.mkdir(fx.inSubstitution("res"))
        try Disk.opaque(fx.inSubstitution("res"))
        try Disk.write(fx.inSubstitution("res/only.txt"), "only")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("fresh/deep/file.txt")), "deep")
        XCTAssertEqual(try Disk.list(fx.inMount("res")), ["only.txt"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("res/old.txt")), ENOENT)
    }

    func testSwappedSubstitutionDirectoryIsServedAsAWhole() throws {
        try Disk.write(fx.inMain("a.txt"), "main a")
        try Disk.write(fx.inMain("b.txt"), "main b")
        try Disk.write(fx.inSubstitution("a.txt"), "old patch a")
        try fx.start()
        try warm()
        let next = fx.root + "/patch.new"
        try Disk.write(next + "/b.txt", "new patch b")
        try Disk.write(next + "/c.txt", "new patch c")
        XCTAssertEqual(rename(fx.substitution, fx.root + "/patch.old"), 0)
        XCTAssertEqual(rename(next, fx.substitution), 0)
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "main a")
        XCTAssertEqual(try Disk.read(fx.inMount("b.txt")), "new patch b")
        XCTAssertEqual(try Disk.read(fx.inMount("c.txt")), "new patch c")
        try Disk.write(fx.inMount("d.txt"), "written after the swap")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("d.txt")), "written after the swap")
        XCTAssertEqual(Disk.lstatError(fx.root + "/patch.old/d.txt"), ENOENT)
    }

    func testFileReplacedInTheMainBundle() throws {
        try Disk.write(fx.inMain("Info.plist"), "version 1")
        try fx.start()
        try warm()
        try fx.replaceMainFile("Info.plist", with: "version 2 is longer")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("Info.plist")), "version 2 is longer")
    }

    func testTypeChangesOnDiskNeverGiveEIO() throws {
        try Disk.write(fx.inSubstitution("thing"), "file")
        try Disk.mkdir(fx.inSubstitution("other"))
        try fx.start()
        try warm()
        XCTAssertEqual(unlink(fx.inSubstitution("thing")), 0)
        try Disk.write(fx.inSubstitution("thing/inside"), "now a directory")
        XCTAssertEqual(rmdir(fx.inSubstitution("other")), 0)
        try Disk.write(fx.inSubstitution("other"), "now a file")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("thing/inside")), "now a directory")
        XCTAssertEqual(try Disk.read(fx.inMount("other")), "now a file")
    }

    func testOpenFilesKeepTheirContentAndNewOpensSeeTheNewFile() throws {
        try Disk.write(fx.inSubstitution("doc.txt"), "first")
        try fx.start()
        let old = open(fx.inMount("doc.txt"), O_RDONLY)
        defer { close(old) }
        XCTAssertGreaterThanOrEqual(old, 0)
        let replacement = fx.root + "/doc.tmp"
        try Disk.write(replacement, "second")
        XCTAssertEqual(rename(replacement, fx.inSubstitution("doc.txt")), 0)
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("doc.txt")), "second")
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = pread(old, &buffer, buffer.count, 0)
        XCTAssertEqual(String(decoding: buffer[..<max(0, count)], as: UTF8.self), "first")
    }

    /// Mounts two subtrees, caches a missing name in each, then adds both names on disk.
    private func addBesideTwoCachedMisses() throws {
        try Disk.write(fx.inMain("Images/icons/a.png"), "a")
        try Disk.write(fx.inMain("Sounds/s.caf"), "s")
        try fx.start()
        try warm()
        XCTAssertEqual(Disk.lstatError(fx.inMount("Images/icons/b.png")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("Sounds/t.caf")), ENOENT)
        try Disk.write(fx.inSubstitution("Images/icons/b.png"), "b")
        try Disk.write(fx.inSubstitution("Sounds/t.caf"), "t")
    }

    func testPartialInvalidationRefreshesOnlyThatSubtree() throws {
        try addBesideTwoCachedMisses()
        try invalidate("Images/icons")
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icons/b.png")), "b")
        XCTAssertEqual(try Disk.list(fx.inMount("Images/icons")).sorted(), ["a.png", "b.png"])
        XCTAssertEqual(try fx.stats()["cached_absent_names"], "1", "the absent Sounds/t.caf stays cached")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("Sounds/t.caf")), "t")
    }

    func testInvalidateCommandRefreshesAndRejectsBadPaths() throws {
        try fx.start()
        try warm()
        XCTAssertEqual(Disk.lstatError(fx.inMount("late.txt")), ENOENT)
        try Disk.write(fx.inSubstitution("late.txt"), "late")
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["invalidate", fx.mountpoint]).status, 0)
        XCTAssertEqual(try Disk.read(fx.inMount("late.txt")), "late")
        let bad = try Spawn.run(MountFixture.binary, ["invalidate", fx.mountpoint, "a/../.."])
        XCTAssertEqual(bad.status, 1)
        XCTAssertEqual(bad.error.split(separator: "\n").count, 1, bad.error)
        try Disk.write(fx.inSubstitution("later.txt"), "later")
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["invalidate", "--all", fx.mountpoint]).status, 0)
        XCTAssertEqual(try Disk.read(fx.inMount("later.txt")), "later")
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["invalidate", "--all", fx.mountpoint, "x"]).status, 64)
        let notMounted = try Spawn.run(MountFixture.binary, ["invalidate", fx.root])
        XCTAssertEqual(notMounted.status, 1)
        XCTAssertTrue(notMounted.error.contains("not a proxybundle mount"), notMounted.error)
    }

    /// `proxybundle invalidate MOUNTPOINT PATH` refreshes that subtree, and only that.
    func testInvalidateCommandWithAPathRefreshesThatSubtree() throws {
        try addBesideTwoCachedMisses()
        let invalidated = try proxybundle(["invalidate", fx.mountpoint, "Images/icons"])
        XCTAssertEqual(invalidated.status, 0, invalidated.error)
        XCTAssertEqual(invalidated.output + invalidated.error, "")
        XCTAssertEqual(try Disk.read(fx.inMount("Images/icons/b.png")), "b")
        XCTAssertEqual(try Disk.list(fx.inMount("Images/icons")).sorted(), ["a.png", "b.png"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("Sounds/t.caf")), ENOENT, "outside the path nothing is forgotten")
        XCTAssertEqual(try fx.figure("invalidations"), 1)
    }

    func testReadOnlyMountCanBeInvalidated() throws {
        try fx.start(["-o", "ro"])
        try warm()
        try Disk.write(fx.inSubstitution("late.txt"), "late")
        try invalidate()
        XCTAssertEqual(try Disk.read(fx.inMount("late.txt")), "late")
        XCTAssertEqual(open(fx.inMount("late.txt"), O_WRONLY), -1)
        XCTAssertEqual(errno, EROFS)
    }
}

/// The same tests through the notifications kernels before 6.16 understand: one per cached
/// name instead of FUSE_NOTIFY_INC_EPOCH.
final class InvalidateFallbackTests: InvalidateTests {
    override func setUpWithError() throws {
        try super.setUpWithError()
        fx.environment = ["PROXYBUNDLE_NO_EPOCH=1"]
    }

    func testStatsReportTheFallback() throws {
        try fx.start()
        try invalidate()
        XCTAssertEqual(try fx.stats()["kernel_epoch_notification"], "refused")
    }
}

/// The same tests through a full invalidation (`/` written to `.invalidate`), which forgets
/// everything instead of just what the daemon saw change on disk.
final class FullInvalidateTests: InvalidateTests {
    override func invalidate(_ text: String = "") throws {
        try super.invalidate(text.isEmpty ? "/" : text)
    }

    /// What exactness cannot see (a write through mmap, say) is flushed this way.
    func testEverythingIsLookedUpAgain() throws {
        for index in 0..<20 { try Disk.write(fx.inMain("a/m\(index)"), "main") }
        try fx.start()
        try warm()
        let before = try fx.figure("misses")
        try invalidate()
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "no")
        try warm()
        XCTAssertGreaterThanOrEqual(try fx.figure("misses") - before, 20)
    }
}

/// An invalidation of the whole tree forgets only the names that changed: the kernel keeps
/// everything else, so walking the tree again asks the daemon nothing.
final class ExactInvalidateTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    func walk() throws -> Int {
        var count = 0
        for directory in ["a", "b"] {
            for name in try Disk.list(fx.inMount(directory)) {
                XCTAssertNotNil(Disk.lstat(fx.inMount(directory + "/" + name)))
                count += 1
            }
        }
        return count
    }

    func misses() throws -> Int { try fx.figure("misses") }

    func testUnchangedNamesStayCachedInTheKernel() throws {
        for index in 0..<150 {
            try Disk.write(fx.inMain("a/m\(index)"), "main \(index)")
            try Disk.write(fx.inSubstitution("b/p\(index)"), "patch \(index)")
        }
        try fx.start()
        XCTAssertEqual(try walk(), 300)
        XCTAssertEqual(try Disk.read(fx.inMount("b/p7")), "patch 7")
        let before = try misses()
        try Disk.write(fx.inSubstitution("b/p7.new"), "changed")
        XCTAssertEqual(rename(fx.inSubstitution("b/p7.new"), fx.inSubstitution("b/p7")), 0)
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try Disk.read(fx.inMount("b/p7")), "changed")
        XCTAssertEqual(try walk(), 300)
        XCTAssertLessThanOrEqual(try misses() - before, 3, "only the changed name was looked up again")
        let stats = try fx.stats()
        XCTAssertEqual(stats["last_invalidation_exact"], "yes")
        XCTAssertEqual(stats["last_invalidation_nodes"].flatMap { Int($0) } ?? 99, 1, "b only (its listing)")
        XCTAssertEqual(stats["last_invalidation_names"].flatMap { Int($0) } ?? 99, 2, "b/p7.new and b/p7")
    }
}
