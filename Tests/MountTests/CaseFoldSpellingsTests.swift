import Foundation
import XCTest

/// A change through one spelling of a name, seen through the others: a file's spellings are
/// one node (one kernel inode), a directory's are nodes of their own, and what the kernel
/// keeps of the others after a change is dropped (see NodeTable+Spellings.swift).
final class CaseFoldSpellingsTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        try Disk.write(fx.main + "/Data/Readme.txt", "main")
    }

    override func tearDown() {
        fx?.tearDown()
    }

    func testAWriteThroughOneSpellingShowsThroughAnother() throws {
        try fx.start(["-o", "casefold"])
        XCTAssertEqual(try Disk.read(fx.inMount("data/readme.txt")), "main")
        XCTAssertEqual(Disk.lstat(fx.inMount("data/readme.txt"))?.st_size, 4)
        try Disk.write(fx.inMount("DATA/README.TXT"), "changed")
        XCTAssertEqual(Disk.lstat(fx.inMount("data/readme.txt"))?.st_size, 7)
        XCTAssertEqual(try Disk.read(fx.inMount("data/readme.txt")), "changed")
        XCTAssertEqual(unlink(fx.inMount("Data/ReadMe.txt")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("data/readme.txt")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("DATA/README.TXT")), ENOENT)
    }

    /// Each spelling of a directory is a node of its own: a working directory keeps the
    /// spelling it was reached by, and the kernel never moves a directory's one dentry from
    /// one spelling to another (as it would with one node for both).
    func testAWorkingDirectoryKeepsTheSpellingItWasReachedBy() throws {
        try fx.start(["-o", "casefold"])
        let upper = open(fx.inMount("DATA"), O_RDONLY | O_DIRECTORY)
        let lower = open(fx.inMount("data"), O_RDONLY | O_DIRECTORY)
        defer { close(upper); close(lower) }
        XCTAssertGreaterThanOrEqual(upper, 0)
        XCTAssertGreaterThanOrEqual(lower, 0)
        XCTAssertEqual(try Disk.read(fx.inMount("Data/readme.TXT")), "main")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(upper)"), fx.inMount("DATA"))
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(lower)"), fx.inMount("data"))
        XCTAssertEqual(Disk.lstat(fx.inMount("DATA"))?.st_ino, Disk.lstat(fx.inMount("data"))?.st_ino, "one directory")
        let saved = FileManager.default.currentDirectoryPath
        defer { _ = chdir(saved) }
        XCTAssertEqual(fchdir(upper), 0)
        XCTAssertEqual(FileManager.default.currentDirectoryPath, fx.inMount("DATA"))
        XCTAssertEqual(try Disk.read("readme.txt"), "main")
    }

    /// A hard link made through one spelling is the same file through every other.
    func testAHardLinkIsOneFileThroughEverySpelling() throws {
        try fx.start(["-o", "casefold"])
        XCTAssertEqual(link(fx.inMount("data/README.txt"), fx.inMount("DATA/Linked.txt")), 0, String(cString: strerror(errno)))
        try Disk.write(fx.inMount("data/linked.TXT"), "through the link")
        XCTAssertEqual(try Disk.read(fx.inMount("Data/Readme.txt")), "through the link")
        XCTAssertEqual(Disk.lstat(fx.inMount("data/readme.txt"))?.st_nlink, 2)
        XCTAssertEqual(Disk.lstat(fx.inMount("DATA/LINKED.TXT"))?.st_ino, Disk.lstat(fx.inMount("Data/Readme.txt"))?.st_ino)
    }

    /// A file handle names one spelling's node; it opens the file after the kernel forgot it,
    /// and a directory by its listed spelling. (The kernel reconnects a forgotten directory
    /// by the name its parent lists for its inode number, which leads to the listed
    /// spelling's node: a handle of a directory taken through another spelling is then stale.)
    func testAFileHandleOpensTheFileAfterTheKernelForgotIt() throws {
        try fx.start(["-o", "casefold"])
        let file = try Handles.take(fx.inMount("DATA/README.TXT"))
        let directory = try Handles.take(fx.inMount("Data"))
        try Handles.dropKernelCaches()
        XCTAssertEqual(Handles.describe(file, in: fx.mountpoint), "main")
        XCTAssertEqual(Handles.describe(directory, in: fx.mountpoint), "directory " + fx.inMount("Data"))
    }

    /// `.invalidate` of a path forgets every spelling of it: a change on disk then shows
    /// through each.
    func testInvalidateShowsAChangeOnDiskThroughEverySpelling() throws {
        try fx.start(["-o", "casefold"])
        XCTAssertEqual(try Disk.read(fx.inMount("data/readme.txt")), "main")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/README.TXT")), "main")
        try Disk.write(fx.main + "/Data/Readme.txt", "changed on disk")
        try Disk.write(fx.main + "/Data/New.txt", "new on disk")
        try fx.acceptLayersAsTheyAre()
        try Disk.write(fx.inMount(".invalidate"), "Data")
        XCTAssertEqual(try Disk.read(fx.inMount("data/readme.txt")), "changed on disk")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/README.TXT")), "changed on disk")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/new.txt")), "new on disk")
        XCTAssertEqual(try Disk.list(fx.inMount("data")).sorted(), ["New.txt", "Readme.txt"])
    }

    /// The kernel remembers a missing name (negative caching); a name made later in another
    /// spelling, in that directory or through another spelling of it, makes it found.
    func testANameMadeInAnotherSpellingEndsARememberedAbsence() throws {
        try fx.start(["-o", "casefold"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("DATA/NEW.TXT")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("Data/New.txt")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("DATA/OTHER")), ENOENT)
        let stats = try fx.stats()
        XCTAssertNotEqual(stats["cached_absent_names"], "0", "the absences are remembered")
        try Disk.write(fx.inMount("data/new.txt"), "new")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/NEW.TXT")), "new")
        XCTAssertEqual(try Disk.read(fx.inMount("Data/New.txt")), "new")
        XCTAssertEqual(mkdir(fx.inMount("data/Other"), 0o755), 0)
        XCTAssertEqual(Disk.lstat(fx.inMount("DATA/OTHER")).map { $0.st_mode & S_IFMT }, S_IFDIR)
    }

    /// Issue 45, item 2: a name looked up in vain through one spelling, then made in the
    /// substitution directly in another: after `.invalidate` (every form of it) each spelling
    /// finds it, the one whose absence the kernel and the daemon remembered included.
    func testInvalidateEndsARememberedAbsenceInEverySpelling() throws {
        try Disk.write(fx.main + "/uni2/old.txt", "old")
        try fx.start(["-o", "casefold"])
        for (round, written) in ["\n", "uni2", "/"].enumerated() {
            let name = "new\(round).txt"
            XCTAssertEqual(Disk.lstatError(fx.inMount("UNI2/" + name)), ENOENT)
            XCTAssertEqual(Disk.lstatError(fx.inMount("Uni2/" + name.uppercased())), ENOENT)
            // an updater, straight into the substitution (its directory made the first time)
            try Disk.write(fx.inSubstitution("uni2/" + name.uppercased()), "new \(round)")
            try Disk.write(fx.inMount(".invalidate"), written)
            let shown = written == "\n" ? "an empty line" : written
            XCTAssertEqual(try? Disk.read(fx.inMount("Uni2/" + name.capitalized)), "new \(round)", "after \(shown)")
            XCTAssertEqual(try? Disk.read(fx.inMount("UNI2/" + name)), "new \(round)", "after \(shown): the remembered spelling")
            XCTAssertEqual(try? Disk.read(fx.inMount("Uni2/" + name.uppercased())), "new \(round)", "after \(shown)")
        }
    }

    /// A rename or a removal through one spelling takes every other spelling of the old name
    /// with it: none still leads to the entry, in the daemon or in the kernel.
    func testOtherSpellingsOfAMovedOrRemovedNameLeadNowhere() throws {
        try fx.start(["-o", "casefold"])
        try Disk.write(fx.inMount("FOO"), "foo")
        XCTAssertNotNil(Disk.lstat(fx.inMount("foo")))
        XCTAssertEqual(rename(fx.inMount("FOO"), fx.inMount("baz")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("foo")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("Foo")), ENOENT)
        let made = open(fx.inMount("foo"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(made, 0, "foo is free again")
        close(made)
        XCTAssertEqual(try Disk.read(fx.inMount("BAZ")), "foo")

        XCTAssertEqual(mkdir(fx.inMount("DIR"), 0o755), 0)
        try Disk.write(fx.inMount("DIR/x"), "x")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/x")), "x")
        XCTAssertEqual(rename(fx.inMount("DIR"), fx.inMount("other")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("dir")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("dir/x")), ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("OTHER/X")), "x")

        try Disk.write(fx.inMount("Data/Gone.txt"), "gone")
        XCTAssertEqual(try Disk.read(fx.inMount("DATA/GONE.TXT")), "gone")
        XCTAssertEqual(unlink(fx.inMount("data/gone.txt")), 0)
        XCTAssertEqual(Disk.lstatError(fx.inMount("DATA/GONE.TXT")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("Data/Gone.txt")), ENOENT)
        XCTAssertEqual(try Disk.list(fx.mountpoint).filter { $0 != "Data" }.sorted(), ["baz", "foo", "other"])
    }

    /// On a kernel without FUSE_NOTIFY_INC_EPOCH, the other spellings of a removed name are
    /// forgotten one by one by the notifier's one worker, after the reply; more of them than
    /// it queues (`KernelNotifier.queueLimit`, 1024) give way to one invalidation of
    /// everything. Either way no spelling leads to the file after a short while.
    func testSpellingsOfARemovedNameAreForgottenWithoutEpochEvenPastTheQueuesBound() throws {
        fx.environment = ["PROXYBUNDLE_NO_EPOCH=1"]
        try fx.start(["-o", "casefold"])
        let invalidations = try fx.figure("invalidations")
        for round in 0..<2 {
            try Disk.write(fx.inMount("few"), "few")
            // a spelling the kernel holds as missing (round 1: from round 0) is forgotten by
            // the worker too, after the reply that made the file
            for name in ["FEW", "Few", "fEw"] {
                try eventually("round \(round): \(name) leads to the file") { Disk.lstat(fx.inMount(name)) != nil }
            }
            XCTAssertEqual(unlink(fx.inMount("few")), 0)
            for name in ["FEW", "Few", "fEw"] {
                try eventually("round \(round): \(name) is forgotten") { Disk.lstatError(fx.inMount(name)) == ENOENT }
            }
        }
        XCTAssertEqual(try fx.figure("invalidations"), invalidations, "a few names are forgotten one by one")

        // 1500 spellings of a twelve-letter name (of 4096), all cached by the kernel
        let word = Array("spellingsxyz")
        let spellings = (0..<1500).map { bits in
            String(word.indices.map { bits & (1 << $0) != 0 ? Character(word[$0].uppercased()) : word[$0] })
        }
        try Disk.write(fx.inMount("SPELLINGSXYZ"), "many")
        for name in spellings { XCTAssertNotNil(Disk.lstat(fx.inMount(name))) }
        XCTAssertEqual(unlink(fx.inMount("SPELLINGSXYZ")), 0)
        try eventually("the overflow invalidates everything") { try fx.figure("invalidations") == invalidations + 1 }
        XCTAssertEqual(try fx.stats()["last_invalidation_exact"], "no")
        for name in spellings {
            try eventually("\(name) is forgotten") { Disk.lstatError(fx.inMount(name)) == ENOENT }
        }
        XCTAssertEqual(try Disk.list(fx.mountpoint).filter { $0 != "Data" }, [])
    }
}
