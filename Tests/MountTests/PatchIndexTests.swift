import Foundation
import XCTest

/// What each patch holds is read once into its index (`LayerIndex`) and kept: these tests change
/// patches behind the daemon's back after their index read them (a directory made where the
/// patch had none, a whiteout or an opaque marker added, a directory removed, a file made a
/// directory), then make the mount see the layers as on disk, exactly (`.invalidate`, which
/// finds the directories changed by their change times, or with `-o watch` by inotify), wholesale (`/` written to `.invalidate`, after which each record is
/// checked by its change time) and by itself (`-o watch`), and compare the view with kernel
/// overlayfs of the changed layers.
final class PatchIndexTests: XCTestCase {
    var fx: MountFixture!
    /// Twelve patches, highest first: more than the 8 above which a directory's names are read
    /// by layer at its first lookup (`KnownNames`), so both ways of looking are taken.
    var patches: [String] = []

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        patches = (0..<12).map { fx.root + "/p\($0)" }
    }

    override func tearDown() { fx?.tearDown() }

    /// A small stack: each patch has a few files of its own in `a`, `o` or `c/d`; `a/b` and
    /// `q` are in no patch at first.
    private func build() throws {
        try Disk.write(fx.inMain("a/b/m.txt"), "main")
        try Disk.write(fx.inMain("a/b/gone.txt"), "main, to be whited out")
        try Disk.write(fx.inMain("a/x.txt"), "main")
        try Disk.write(fx.inMain("o/m.txt"), "main, under an opaque directory to be")
        try Disk.write(fx.inMain("c/d/e/deep.txt"), "main")
        for (index, patch) in patches.enumerated() {
            try Disk.write(patch + "/a/p\(index).txt", "p\(index)")
            if index % 3 == 0 { try Disk.write(patch + "/o/p\(index).txt", "p\(index)") }
            if index % 4 == 1 { try Disk.write(patch + "/c/d/p\(index).txt", "p\(index)") }
        }
    }

    /// Every name the changes touch looked up before any listing (found, or not), then every
    /// entry walked: the patches' records of each directory are read and kept.
    private func warm() throws {
        for path in ["a/b/m.txt", "a/b/gone.txt", "a/b/new.txt", "q/new.txt", "o/m.txt", "o/p3.txt",
                     "c/d/p1.txt", "c/d/e/deep.txt", "a/p3.txt", "a/p3.txt/in.txt"] {
            _ = Disk.lstat(fx.inMount(path))
        }
        _ = try OverlayTree.walk(fx.mountpoint)
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/b/new.txt")), ENOENT)
        XCTAssertEqual(Set(try Disk.list(fx.inMount("o"))), Set(["m.txt"] + [0, 3, 6, 9].map { "p\($0).txt" }))
    }

    /// Changes in the patches of every kind an index records.
    private func change() throws {
        // a directory made in a patch that had its parent but not it, and one in no layer
        try Disk.write(patches[3] + "/a/b/new.txt", "p3, made behind the daemon's back")
        try Disk.write(patches[5] + "/q/new.txt", "p5, in a directory no layer had")
        // a whiteout added where the patch had the directory
        try Disk.whiteout(patches[2] + "/a/b", "gone.txt")
        // an opaque marker added: p6 hides p9, and the main bundle, in o
        try Disk.opaque(patches[6] + "/o")
        // a directory removed from a patch, and a file made a directory
        try FileManager.default.removeItem(atPath: patches[1] + "/c/d")
        try FileManager.default.removeItem(atPath: patches[3] + "/a/p3.txt")
        try Disk.write(patches[3] + "/a/p3.txt/in.txt", "p3, a directory now")
    }

    private func checkAgainstKernel() throws {
        XCTAssertEqual(try Disk.read(fx.inMount("a/b/new.txt")), "p3, made behind the daemon's back")
        XCTAssertEqual(try Disk.read(fx.inMount("q/new.txt")), "p5, in a directory no layer had")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/b/gone.txt")), ENOENT)
        XCTAssertEqual(Set(try Disk.list(fx.inMount("a/b"))), ["m.txt", "new.txt"])
        XCTAssertEqual(Set(try Disk.list(fx.inMount("o"))), ["p0.txt", "p3.txt", "p6.txt"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("c/d/p1.txt")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("a/p3.txt/in.txt")), "p3, a directory now")
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution] + patches + [fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)
    }

    /// `.invalidate` with an empty line: the indexes find the directories changed by their
    /// change times, and which names changed by reading those again.
    func testChangesInPatchesShowAfterAnExactInvalidation() throws {
        try build()
        try fx.start(patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        try warm()
        try change()
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/b/new.txt")), ENOENT, "the cached view holds until invalidation")
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "yes")
        try checkAgainstKernel()
    }

    /// A directory's mode changed in the patch that gives its attributes (the highest that has
    /// it) shows after an exact `.invalidate`: its change time moved, though no name in it did.
    func testADirectorysModeChangedInAPatchShowsAfterAnExactInvalidation() throws {
        try build()
        try fx.start(patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        try warm()
        XCTAssertEqual(Disk.lstat(fx.inMount("a")).map { $0.st_mode & 0o7777 }, 0o755)
        XCTAssertEqual(chmod(patches[0] + "/a", 0o750), 0)
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "yes")
        XCTAssertEqual(Disk.lstat(fx.inMount("a")).map { $0.st_mode & 0o7777 }, 0o750)
    }

    /// `/` written to `.invalidate`: the watches start over, and each record is checked by the
    /// change time of its directory when next used.
    func testChangesInPatchesShowAfterInvalidatingEverything() throws {
        try build()
        try fx.start(patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        try warm()
        try change()
        try Disk.write(fx.inMount(".invalidate"), "/\n")
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "no")
        try checkAgainstKernel()
    }

    /// `invalidate PATH`: that subtree is read again in every patch.
    func testChangesInPatchesShowAfterInvalidatingTheirPaths() throws {
        try build()
        try fx.start(patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        try warm()
        try change()
        try Disk.write(fx.inMount(".invalidate"), "a\nq\no\nc\n")
        try checkAgainstKernel()
    }

    /// `-o watch`: the changes show by themselves.
    func testChangesInPatchesShowByThemselvesWithWatch() throws {
        try build()
        try fx.start(["-o", "watch"], patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        try warm()
        try change()
        let deadline = Date().addingTimeInterval(20)
        while (try? Disk.read(fx.inMount("a/p3.txt/in.txt"))) == nil || Disk.lstat(fx.inMount("a/b/gone.txt")) != nil
            || Disk.lstat(fx.inMount("q/new.txt")) == nil {
            guard Date() < deadline else { throw TestFailure("the changes did not show within 20 s") }
            usleep(10_000)
        }
        // the watch invalidates once the changes settle; the last of them may still be on its way
        try Disk.write(fx.inMount(".invalidate"), "\n")
        try checkAgainstKernel()
    }

    /// `a`, which all twelve patches hold, has a map of which patches hold each name
    /// (`NameMap`), built at its first lookup and kept while the records it was built from are:
    /// a name added to a patch there behind the daemon's back, a whiteout file hiding a file of
    /// the main bundle and a patch's file removed show after the invalidation `how` writes,
    /// as kernel overlayfs shows them.
    private func checkChangesInAMappedDirectory(invalidating how: String) throws {
        try build()
        try fx.start(patches: patches)
        defer { try? fx.acceptLayersAsTheyAre() }
        // by name, no listing: each answered through the map of `a`
        XCTAssertEqual(try Disk.read(fx.inMount("a/p7.txt")), "p7")
        XCTAssertEqual(try Disk.read(fx.inMount("a/x.txt")), "main")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/late.txt")), ENOENT)
        try Disk.write(patches[7] + "/a/late.txt", "p7, made behind the daemon's back")
        try Disk.whiteout(patches[4] + "/a", "x.txt")
        try FileManager.default.removeItem(atPath: patches[7] + "/a/p7.txt")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/late.txt")), ENOENT, "the cached view holds until invalidation")
        try Disk.write(fx.inMount(".invalidate"), how)
        XCTAssertEqual(try Disk.read(fx.inMount("a/late.txt")), "p7, made behind the daemon's back")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/x.txt")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/p7.txt")), ENOENT)
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution] + patches + [fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)
    }

    func testChangesInAMappedDirectoryShowAfterAnExactInvalidation() throws {
        try checkChangesInAMappedDirectory(invalidating: "\n")
    }

    func testChangesInAMappedDirectoryShowAfterInvalidatingItsPath() throws {
        try checkChangesInAMappedDirectory(invalidating: "a\n")
    }

    /// A swap between orders of the same patches that falls back to forgetting everything
    /// (here the root merges other patches in the new order: one patch's root is opaque)
    /// shows the layers as on disk, as `/` written to `.invalidate` does: the map of `a`
    /// (`NameMap`) is made again from the patches' records, checked anew, not carried from the
    /// view before, which knew nothing of a file made behind the daemon's back.
    func testASwapThatForgetsEverythingMapsDirectoriesAgain() throws {
        try build()
        let opaque = fx.root + "/opaque"
        try Disk.write(opaque + "/top.txt", "opaque root")
        try Disk.opaque(opaque)
        try fx.start(patches: patches + [opaque])
        defer { try? fx.acceptLayersAsTheyAre() }
        XCTAssertEqual(try Disk.read(fx.inMount("a/p7.txt")), "p7")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/late.txt")), ENOENT)
        try Disk.write(patches[2] + "/a/late.txt", "p2, made behind the daemon's back")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/late.txt")), ENOENT, "the cached view holds until invalidation")
        let order = Array(patches.prefix(6)) + [opaque] + Array(patches.dropFirst(6))
        try Disk.write(fx.inMount(".layers"), order.map { $0 + "\n" }.joined())
        XCTAssertEqual(try Disk.read(fx.inMount("a/late.txt")), "p2, made behind the daemon's back")
        XCTAssertEqual(try Disk.read(fx.inMount("a/p5.txt")), "p5")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/p7.txt")), ENOENT, "below the opaque root now")
        XCTAssertEqual(try Disk.read(fx.inMount("top.txt")), "opaque root")
    }

    /// `a`, which all twelve patches hold, is opaque in the sixth: its map (`NameMap`) holds
    /// every patch's names, and tells the lookup of `a` where it stops merging; the lookups in
    /// `a` then see only the patches above the opaque one through the same map. On a fresh
    /// mount, names first, no listing before: the names of the patches below it and of the
    /// main bundle are missing, as in kernel overlayfs.
    func testAMappedDirectoryOpaqueInOnePatchHidesThoseBelow() throws {
        try build()
        try Disk.opaque(patches[5] + "/a")
        try fx.start(patches: patches)
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/p6.txt")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("a/p5.txt")), "p5")
        XCTAssertEqual(try Disk.read(fx.inMount("a/p0.txt")), "p0")
        for name in ["p11.txt", "x.txt", "b"] { XCTAssertEqual(Disk.lstatError(fx.inMount("a/" + name)), ENOENT, name) }
        XCTAssertEqual(Set(try Disk.list(fx.inMount("a"))), Set((0...5).map { "p\($0).txt" }))
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution] + patches + [fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)
    }

    /// A lookup asks no patch about a directory the patch lacks, nor about a name its record
    /// of the directory lacks: on a fresh mount, looking up a file in `c/d/e` (which 3 of the 12
    /// patches have as far as `c/d`, none further) and names missing there makes no system
    /// call that fails in a patch. Counted with strace: the few calls that fail are the
    /// substitution's (it has none of these directories) and the main bundle's (the missing
    /// names). Without the index, `c/d` and `c/d/e` were opened in every patch.
    func testALookupAsksNoPatchThatLacksTheDirectory() throws {
        try build()
        try fx.start(patches: patches)
        let trace = fx.root + "/strace.out"
        let tracer = try fx.traceDaemon(["-e", "status=failed", "-e", "trace=openat,openat2,newfstatat,statx,getxattr,listxattr"],
                                     into: trace)
        defer { kill(tracer, SIGKILL); _ = Spawn.wait(tracer, seconds: 10) }
        XCTAssertEqual(try Disk.read(fx.inMount("c/d/e/deep.txt")), "main")
        for name in ["missing.txt", "other.txt", "p1.txt"] { XCTAssertEqual(Disk.lstatError(fx.inMount("c/d/e/" + name)), ENOENT) }
        kill(tracer, SIGINT)
        XCTAssertNotNil(Spawn.wait(tracer, seconds: 10), "strace ended")
        let failed = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
            .filter { $0.contains("= -1 ENOENT") || $0.contains("= -1 ENOTDIR") }
        // the substitution's c (and its whiteout check), and the main bundle's three missing names
        XCTAssertLessThanOrEqual(failed.count, 6, failed.joined(separator: " | "))
    }

    /// The first lookups in a directory that many patches hold (`a`: all twelve, so the view
    /// maps it, see `NameMap`) take the patches' names from the map and look in the
    /// substitution and the main bundle as on two layers: nothing reads the main bundle's
    /// directory (the names of 5,000 files in 220 directories, read at each directory's first
    /// lookup, cost more than the lookups under 1,000 thin patches). Counted with strace
    /// once `a` itself was looked up, which read every patch's record of it: no `getdents64`
    /// of an `a` while a found name, a patch's name and a missing one are looked up in it.
    func testTheFirstLookupsInAMappedDirectoryReadNoDirectory() throws {
        try build()
        try fx.start(patches: patches)
        XCTAssertNotNil(Disk.lstat(fx.inMount("a")))
        let trace = fx.root + "/strace.out"
        let tracer = try fx.traceDaemon(["-y", "-e", "trace=getdents64,openat,openat2,newfstatat"], into: trace)
        defer { kill(tracer, SIGKILL); _ = Spawn.wait(tracer, seconds: 10) }
        XCTAssertEqual(try Disk.read(fx.inMount("a/x.txt")), "main")
        XCTAssertEqual(try Disk.read(fx.inMount("a/p3.txt")), "p3")
        XCTAssertEqual(Disk.lstatError(fx.inMount("a/missing.txt")), ENOENT)
        kill(tracer, SIGINT)
        XCTAssertNotNil(Spawn.wait(tracer, seconds: 10), "strace ended")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        XCTAssertTrue(lines.contains { $0.contains("x.txt") }, "the lookups were traced")
        let reads = lines.filter { $0.contains("getdents64(") && $0.contains("/a>") }
        XCTAssertEqual(reads.count, 0, reads.joined(separator: " | "))
    }

    /// The directories of the patches, each patch's root among them.
    private func patchDirectories() throws -> Int {
        try patches.reduce(0) { count, patch in
            let below = try FileManager.default.subpathsOfDirectory(atPath: patch).filter { name in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: patch + "/" + name, isDirectory: &isDirectory) && isDirectory.boolValue
            }
            return count + 1 + below.count
        }
    }

    /// The inotify watches the daemon holds: a line each in the fdinfo of its inotify descriptors.
    private func daemonWatches() throws -> Int {
        let fds = "/proc/\(fx.daemon)/fdinfo"
        return try FileManager.default.contentsOfDirectory(atPath: fds).reduce(0) { count, fd in
            let info = (try? String(contentsOfFile: "\(fds)/\(fd)", encoding: .utf8)) ?? ""
            return count + info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
    }

    /// A mount is reported ready once every patch's index is read (`indexed_directories`: every
    /// directory of the twelve patches), and without `-o watch` none of them is watched (a watch
    /// cost more than the read: `.invalidate` compares change times instead): the first
    /// lookups on the fresh mount, names deep in the tree and missing ones, read no directory
    /// of a patch (strace: no `getdents64` there).
    func testAMountIsReadyWithEveryIndexReadAndNoPatchWatched() throws {
        try build()
        try fx.start(patches: patches)
        let directories = try patchDirectories()
        XCTAssertEqual(try fx.figure("indexed_directories"), directories)
        XCTAssertLessThan(try daemonWatches(), patches.count, "the patches' directories are not watched")
        let trace = fx.root + "/strace.out"
        let tracer = try fx.traceDaemon(["-y", "-e", "trace=getdents64"], into: trace)
        defer { kill(tracer, SIGKILL); _ = Spawn.wait(tracer, seconds: 10) }
        XCTAssertEqual(try Disk.read(fx.inMount("c/d/p1.txt")), "p1")
        XCTAssertEqual(try Disk.read(fx.inMount("o/p3.txt")), "p3")
        XCTAssertEqual(try Disk.read(fx.inMount("a/b/m.txt")), "main")
        for path in ["a/missing.txt", "c/d/e/missing.txt", "q/missing.txt"] { XCTAssertEqual(Disk.lstatError(fx.inMount(path)), ENOENT) }
        kill(tracer, SIGINT)
        XCTAssertNotNil(Spawn.wait(tracer, seconds: 10), "strace ended")
        let reads = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
            .filter { line in line.contains("getdents64(") && patches.contains { line.contains($0 + "/") || line.contains($0 + ">") } }
        XCTAssertEqual(reads.count, 0, reads.joined(separator: " | "))
        XCTAssertEqual(try fx.figure("indexed_directories"), directories)
    }

    /// With `-o watch`, which must hear of changes by itself, each directory an index read is
    /// watched from the mount on.
    func testWithWatchEveryIndexedDirectoryIsWatched() throws {
        try build()
        try fx.start(["-o", "watch"], patches: patches)
        let directories = try patchDirectories()
        XCTAssertEqual(try fx.figure("indexed_directories"), directories)
        XCTAssertGreaterThanOrEqual(try daemonWatches(), directories)
    }
}
