import Foundation
import XCTest

/// Real tools (cp, tar, rsync, sed, sqlite3, git) working on main-bundle files through the
/// mount: the result shows through the mount, the changes land in the substitution, and the
/// main bundle stays as it was (the fixture checksums it at teardown).
final class RealToolsTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }
    override func tearDown() { fx?.tearDown() }

    // MARK: cp

    func testCpArchiveCopiesAMainTreeOutOfTheMount() throws {
        try makeMainTree()
        try fx.start()
        let out = try scratch("out")
        try tool("cp", ["-a", fx.inMount("tree"), out + "/"])
        XCTAssertEqual(try snapshot(out + "/tree"), try snapshot(fx.inMain("tree")))
        XCTAssertEqual(try snapshot(out + "/tree"), try snapshot(fx.inMount("tree")))
        XCTAssertEqual(Disk.readLink(out + "/tree/link"), "sub/run.sh")
        XCTAssertEqual(Disk.lstat(out + "/tree/hard")?.st_ino, Disk.lstat(out + "/tree/a.txt")?.st_ino, "the hard link is kept")
        XCTAssertEqual(try Disk.list(fx.substitution).filter { $0 != ".wh..wh.work" }, [], "reading copies nothing up")
    }

    func testCpArchiveCopiesATreeIntoTheMountOverMainFiles() throws {
        try makeMainTree()
        let src = try scratch("src")
        try Disk.write(src + "/tree/a.txt", "alpha, second edition\n", mode: 0o600)
        try Disk.write(src + "/tree/new.txt", "brand new\n", mode: 0o644)
        try Disk.write(src + "/tree/sub/new/deep.txt", "deep\n", mode: 0o444)
        try Disk.symlink(src + "/tree/link", to: "a.txt")
        try stampTimes(src + "/tree", base: 1_600_000_000)
        try fx.start()
        try tool("cp", ["-a", src + "/tree", fx.mountpoint + "/"])
        let mounted = try snapshot(fx.inMount("tree"))
        for (path, entry) in try snapshot(src + "/tree") {
            XCTAssertEqual(mounted[path], entry, path)
        }
        XCTAssertEqual(try Disk.read(fx.inMount("tree/sub/run.sh")), "#!/bin/sh\necho run\n", "main files stay visible")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("tree/a.txt")), "alpha, second edition\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("tree/sub/new/deep.txt")), "deep\n")
        XCTAssertEqual(Disk.readLink(fx.inSubstitution("tree/link")), "a.txt")
        XCTAssertEqual(Disk.lstat(fx.inSubstitution("tree/a.txt")).map { $0.st_mode & 0o7777 }, 0o600)
        XCTAssertEqual(try Disk.list(fx.inSubstitution("tree")).filter { $0.hasPrefix(".wh.") }, [])
        XCTAssertEqual(try Disk.read(fx.inMain("tree/a.txt")), "alpha\n")
    }

    // MARK: tar

    func testTarCreatesAnArchiveFromTheMount() throws {
        try makeMainTree()
        try fx.start()
        let out = try scratch("out")
        try tool("tar", ["-C", fx.mountpoint, "-cf", out + "/tree.tar", "tree"])
        let listed = try tool("tar", ["-tf", out + "/tree.tar"]).split(separator: "\n").map(String.init)
        XCTAssertEqual(listed.sorted(), ["tree/", "tree/a.txt", "tree/hard", "tree/link", "tree/sub/", "tree/sub/empty/", "tree/sub/run.sh"])
        try tool("tar", ["-C", out, "-xf", out + "/tree.tar"])
        XCTAssertEqual(Disk.lstat(out + "/tree/hard")?.st_ino, Disk.lstat(out + "/tree/a.txt")?.st_ino, "the hard link is kept")
        // the default archive format keeps whole seconds only
        XCTAssertEqual(try snapshot(out + "/tree", nanoseconds: false), try snapshot(fx.inMain("tree"), nanoseconds: false))
        XCTAssertEqual(try Disk.list(fx.substitution).filter { $0 != ".wh..wh.work" }, [], "reading copies nothing up")
    }

    func testTarExtractsIntoTheMountOverMainFiles() throws {
        try makeMainTree()
        let src = try scratch("src")
        try Disk.write(src + "/tree/a.txt", "alpha from tar\n", mode: 0o640)
        try Disk.write(src + "/tree/sub/run.sh", "#!/bin/sh\necho tar\n", mode: 0o700)
        try Disk.write(src + "/tree/added/file", "added\n")
        try Disk.symlink(src + "/tree/link", to: "added/file")
        try stampTimes(src + "/tree", base: 1_650_000_000)
        try tool("tar", ["-C", src, "-cf", src + "/tree.tar", "tree"])
        try fx.start()
        try tool("tar", ["-C", fx.mountpoint, "-xf", src + "/tree.tar"])
        let mounted = try snapshot(fx.inMount("tree"), nanoseconds: false)
        for (path, entry) in try snapshot(src + "/tree", nanoseconds: false) {
            XCTAssertEqual(mounted[path], entry, path)
        }
        XCTAssertEqual(try Disk.list(fx.inMount("tree/sub")).sorted(), ["empty", "run.sh"])
        XCTAssertEqual(try Disk.read(fx.inSubstitution("tree/a.txt")), "alpha from tar\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("tree/sub/run.sh")), "#!/bin/sh\necho tar\n")
        XCTAssertEqual(Disk.readLink(fx.inSubstitution("tree/link")), "added/file")
        XCTAssertEqual(try Disk.list(fx.inSubstitution("tree")).filter { $0.hasPrefix(".wh.") }, [])
        XCTAssertEqual(try Disk.read(fx.inMain("tree/sub/run.sh")), "#!/bin/sh\necho run\n")
    }

    // MARK: rsync

    func testRsyncUpdatesAndAddsFiles() throws {
        try makeRsyncLayers()
        try fx.start()
        try tool("rsync", ["-a", fx.root + "/src/", fx.inMount("dir/")])
        XCTAssertEqual(try Disk.read(fx.inMount("dir/a.txt")), "a, updated by rsync\n")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/b.txt")), "b\n")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/new.txt")), "new\n")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/sub/n.txt")), "nested\n")
        XCTAssertEqual(try Disk.read(fx.inMount("dir/gone.txt")), "gone\n", "without --delete nothing goes")
        let sent = Disk.lstat(fx.root + "/src/a.txt")
        XCTAssertEqual(Disk.lstat(fx.inMount("dir/a.txt"))?.st_mtim.tv_sec, sent?.st_mtim.tv_sec)
        XCTAssertEqual(Disk.lstat(fx.inSubstitution("dir/a.txt"))?.st_mtim.tv_sec, sent?.st_mtim.tv_sec)
        XCTAssertEqual(try Disk.read(fx.inSubstitution("dir/a.txt")), "a, updated by rsync\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("dir/sub/n.txt")), "nested\n")
        XCTAssertEqual(Disk.lstatError(fx.inSubstitution("dir/b.txt")), ENOENT, "an unchanged file is not copied up")
        XCTAssertEqual(try Disk.list(fx.inMount("dir")).sorted(), ["a.txt", "b.txt", "gone.txt", "new.txt", "olddir", "sub"])
        // a second run finds nothing to do
        XCTAssertEqual(try tool("rsync", ["-a", "-i", fx.root + "/src/", fx.inMount("dir/")]), "")
    }

    func testRsyncDeleteLeavesWhiteoutsForMainEntries() throws {
        try makeRsyncLayers()
        try fx.start()
        try tool("rsync", ["-a", "--delete", fx.root + "/src/", fx.inMount("dir/")])
        XCTAssertEqual(try Disk.list(fx.inMount("dir")).sorted(), ["a.txt", "b.txt", "new.txt", "sub"])
        XCTAssertEqual(Disk.lstatError(fx.inMount("dir/gone.txt")), ENOENT)
        XCTAssertEqual(Disk.lstatError(fx.inMount("dir/olddir")), ENOENT)
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("dir/.wh.gone.txt")))
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("dir/.wh.olddir")))
        XCTAssertEqual(try Disk.read(fx.inSubstitution("dir/a.txt")), "a, updated by rsync\n")
        XCTAssertEqual(try Disk.read(fx.inMain("dir/gone.txt")), "gone\n")
        XCTAssertEqual(try tool("rsync", ["-a", "-i", "--delete", fx.root + "/src/", fx.inMount("dir/")]), "")
    }

    // MARK: sed

    func testSedInPlaceEditsAMainFile() throws {
        try Disk.write(fx.inMain("conf/settings.ini"), "[ui]\ncolor=blue\nsize=10\n", mode: 0o640)
        try fx.start()
        try tool("sed", ["-i", "s/blue/green/", fx.inMount("conf/settings.ini")])
        XCTAssertEqual(try Disk.read(fx.inMount("conf/settings.ini")), "[ui]\ncolor=green\nsize=10\n")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("conf/settings.ini")), "[ui]\ncolor=green\nsize=10\n")
        XCTAssertEqual(try Disk.read(fx.inMain("conf/settings.ini")), "[ui]\ncolor=blue\nsize=10\n")
        XCTAssertEqual(Disk.lstat(fx.inMount("conf/settings.ini")).map { $0.st_mode & 0o7777 }, 0o640)
        XCTAssertEqual(try Disk.list(fx.inMount("conf")), ["settings.ini"], "no temporary file is left")
        XCTAssertEqual(try Disk.list(fx.inSubstitution("conf")), ["settings.ini"])
        // a second edit works on the substitution's copy
        try tool("sed", ["-i", "s/size=10/size=12/", fx.inMount("conf/settings.ini")])
        XCTAssertEqual(try Disk.read(fx.inMount("conf/settings.ini")), "[ui]\ncolor=green\nsize=12\n")
    }

    // MARK: sqlite3

    func testSqliteInsertsIntoAMainDatabase() throws {
        try Disk.mkdir(fx.inMain("db"))
        try tool("sqlite3", [fx.inMain("db/app.sqlite"),
                             "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO t(name) VALUES ('a'), ('b'), ('c');"])
        try fx.start()
        let db = fx.inMount("db/app.sqlite")
        try tool("sqlite3", [db, "BEGIN; INSERT INTO t(name) VALUES ('d'); INSERT INTO t(name) VALUES ('e'); COMMIT;"])
        XCTAssertEqual(try tool("sqlite3", [db, "SELECT count(*) FROM t;"]), "5\n")
        XCTAssertEqual(try tool("sqlite3", [db, "SELECT group_concat(name, ',') FROM t;"]), "a,b,c,d,e\n")
        XCTAssertEqual(try tool("sqlite3", [db, "PRAGMA integrity_check;"]), "ok\n")
        XCTAssertEqual(try Disk.list(fx.inMount("db")), ["app.sqlite"], "the journal is gone")
        XCTAssertEqual(try tool("sqlite3", [fx.inSubstitution("db/app.sqlite"), "SELECT count(*) FROM t;"]), "5\n")
        XCTAssertEqual(try tool("sqlite3", ["-readonly", fx.inMain("db/app.sqlite"), "SELECT count(*) FROM t;"]), "3\n")
    }

    /// One connection, two write transactions: before its second one, sqlite checks the
    /// database's inode number by path against the one it saw at open (SQLITE_READONLY_DBMOVED).
    func testSqliteKeepsWritingAfterItsFirstCommit() throws {
        try Disk.mkdir(fx.inMain("db"))
        try tool("sqlite3", [fx.inMain("db/app.sqlite"), "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);"])
        try fx.start()
        let db = fx.inMount("db/app.sqlite")
        try tool("sqlite3", [db, "INSERT INTO t VALUES (3); INSERT INTO t VALUES (4);"])
        XCTAssertEqual(try tool("sqlite3", [db, "SELECT sum(x) FROM t;"]), "10\n")
        XCTAssertEqual(try tool("sqlite3", [fx.inSubstitution("db/app.sqlite"), "SELECT sum(x) FROM t;"]), "10\n")
    }

    func testSqliteInWalModeThroughTheMount() throws {
        try Disk.mkdir(fx.inMain("db"))
        try tool("sqlite3", [fx.inMain("db/wal.sqlite"),
                             "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1), (2); PRAGMA wal_checkpoint(TRUNCATE);"])
        // leave main with the database only, as a bundle would ship it
        try? FileManager.default.removeItem(atPath: fx.inMain("db/wal.sqlite-wal"))
        try? FileManager.default.removeItem(atPath: fx.inMain("db/wal.sqlite-shm"))
        try fx.start()
        let db = fx.inMount("db/wal.sqlite")
        try tool("sqlite3", [db, "BEGIN; INSERT INTO t VALUES (3); COMMIT;"])
        XCTAssertEqual(try tool("sqlite3", [db, "SELECT sum(x) FROM t;"]), "6\n")
        XCTAssertEqual(try tool("sqlite3", [db, "PRAGMA integrity_check;"]), "ok\n")
        XCTAssertEqual(try tool("sqlite3", [fx.inSubstitution("db/wal.sqlite"), "SELECT sum(x) FROM t;"]), "6\n")
    }

    // MARK: git

    func testGitCommitsAMainDirectory() throws {
        try Disk.write(fx.inMain("project/README.md"), "# Project\n")
        try Disk.write(fx.inMain("project/src/main.c"), "int main(void) { return 0; }\n")
        try Disk.write(fx.inMain("project/run.sh"), "#!/bin/sh\n", mode: 0o755)
        try fx.start()
        let home = try scratch("home")
        let env = ["HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
                   "GIT_AUTHOR_NAME=Tester", "GIT_AUTHOR_EMAIL=tester@example.com",
                   "GIT_COMMITTER_NAME=Tester", "GIT_COMMITTER_EMAIL=tester@example.com"]
        let project = fx.inMount("project")
        try tool("git", ["-C", project, "init", "-q", "-b", "main"], environment: env)
        try tool("git", ["-C", project, "add", "-A"], environment: env)
        try tool("git", ["-C", project, "commit", "-q", "-m", "initial"], environment: env)
        XCTAssertEqual(try tool("git", ["-C", project, "status", "--porcelain"], environment: env), "")
        let log = try tool("git", ["-C", project, "log", "--oneline"], environment: env)
        XCTAssertEqual(log.split(separator: "\n").count, 1)
        XCTAssertTrue(log.hasSuffix(" initial\n"), log)
        XCTAssertEqual(try tool("git", ["-C", project, "ls-files", "-s"], environment: env)
                        .split(separator: "\n").map { String($0.prefix(6)) + " " + ($0.split(separator: "\t").last ?? "") },
                       ["100644 README.md", "100755 run.sh", "100644 src/main.c"])
        try tool("git", ["-C", project, "fsck", "--strict"], environment: env)
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("project/.git/HEAD")))
        XCTAssertEqual(Disk.lstatError(fx.inMain("project/.git")), ENOENT)
    }

    // MARK: running programs from the mount

    /// The kernel opens a program it executes with a flag of its own (__FMODE_EXEC) among the
    /// open flags it hands the daemon; passed on to openat2, which refuses unknown flags, it
    /// made every exec through the mount fail with EINVAL.
    func testProgramsAndScriptsRunFromTheMountBeforeAndAfterCopyUp() throws {
        try makeMainTree()
        let program = "/usr/bin/env"
        XCTAssertEqual(Disk.lstat(program).map { $0.st_mode & S_IFMT }, S_IFREG)
        try copyFile(program, to: fx.inMain("bin/env"), mode: 0o755)
        try fx.start()
        for stage in ["from the main bundle", "after a copy-up"] {
            let ran = try Spawn.run(fx.inMount("bin/env"), ["printf", "env ran"])
            XCTAssertEqual(ran.status, 0, "\(stage): \(ran.error)")
            XCTAssertEqual(ran.output, "env ran", stage)
            let script = try Spawn.run(fx.inMount("tree/sub/run.sh"), [])
            XCTAssertEqual(script.status, 0, "\(stage): \(script.error)")
            XCTAssertEqual(script.output, "run\n", stage)
            // appending leaves both runnable (an ELF file may have trailing bytes)
            for path in ["bin/env", "tree/sub/run.sh"] where stage == "from the main bundle" {
                let fd = open(fx.inMount(path), O_WRONLY | O_APPEND)
                XCTAssertGreaterThanOrEqual(fd, 0, path)
                XCTAssertEqual(write(fd, "\n", 1), 1, path)
                close(fd)
            }
        }
        XCTAssertNotNil(Disk.lstat(fx.inSubstitution("bin/env")), "the program was copied up")
    }

    // MARK: helpers

    private func copyFile(_ source: String, to target: String, mode: mode_t) throws {
        guard let data = FileManager.default.contents(atPath: source) else { throw TestFailure("cannot read \(source)") }
        try Disk.makeParent(target)
        guard FileManager.default.createFile(atPath: target, contents: data) else { throw TestFailure("cannot write \(target)") }
        guard chmod(target, mode) == 0 else { throw TestFailure("chmod \(target): errno \(errno)") }
    }

    /// Runs /usr/bin/NAME; a non-zero exit fails the test with the command and its stderr.
    @discardableResult
    private func tool(_ name: String, _ arguments: [String], environment: [String] = []) throws -> String {
        let result = try Spawn.run("/usr/bin/" + name, arguments, environment: environment)
        guard result.status == 0 else {
            throw TestFailure("\(name) \(arguments.joined(separator: " ")) exited \(result.status): \(result.error)")
        }
        return result.output
    }

    /// A fresh directory beside the fixture's layers (removed with them).
    private func scratch(_ name: String) throws -> String {
        let path = fx.root + "/" + name
        try Disk.mkdir(path)
        return path
    }

    /// main/tree: a.txt (0640) and its hard link hard, sub/run.sh (0755), sub/empty/ (0700),
    /// link -> sub/run.sh, every entry with its own mtime.
    private func makeMainTree() throws {
        try Disk.write(fx.inMain("tree/a.txt"), "alpha\n", mode: 0o640)
        try Disk.write(fx.inMain("tree/sub/run.sh"), "#!/bin/sh\necho run\n", mode: 0o755)
        try Disk.mkdir(fx.inMain("tree/sub/empty"), mode: 0o700)
        try Disk.symlink(fx.inMain("tree/link"), to: "sub/run.sh")
        XCTAssertEqual(link(fx.inMain("tree/a.txt"), fx.inMain("tree/hard")), 0)
        try stampTimes(fx.inMain("tree"), base: 1_500_000_000)
    }

    /// main/dir: a.txt, b.txt, gone.txt, olddir/x; src: a.txt changed, b.txt the same (same
    /// size and mtime), new.txt, sub/n.txt.
    private func makeRsyncLayers() throws {
        for name in ["a.txt", "b.txt", "gone.txt"] {
            try Disk.write(fx.inMain("dir/" + name), String(name.prefix(while: { $0 != "." })) + "\n")
        }
        try Disk.write(fx.inMain("dir/olddir/x"), "x\n")
        try stampTimes(fx.inMain("dir"), base: 1_500_000_000)
        let src = try scratch("src")
        try Disk.write(src + "/a.txt", "a, updated by rsync\n")
        try Disk.write(src + "/b.txt", "b\n")
        try Disk.write(src + "/new.txt", "new\n")
        try Disk.write(src + "/sub/n.txt", "nested\n")
        try stampTimes(src, base: 1_700_000_000)
        try setTime(src + "/b.txt", Disk.lstat(fx.inMain("dir/b.txt"))!.st_mtim)
    }

    /// Gives every entry under `root` a distinct mtime (and atime), children before parents.
    private func stampTimes(_ root: String, base: Int) throws {
        var next = base
        func visit(_ path: String) throws {
            if let st = Disk.lstat(path), st.st_mode & S_IFMT == S_IFDIR {
                for name in try FileManager.default.contentsOfDirectory(atPath: path).sorted() {
                    try visit(path + "/" + name)
                }
            }
            next += 1000
            try setTime(path, timespec(tv_sec: next, tv_nsec: 123_456_789))
        }
        try visit(root)
    }

    private func setTime(_ path: String, _ time: timespec) throws {
        var times = [time, time]
        guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw TestFailure("utimensat \(path): errno \(errno)")
        }
    }

    /// Relative path ("." for the root) -> type, mode, mtime and content or symlink target.
    private func snapshot(_ root: String, nanoseconds: Bool = true) throws -> [String: String] {
        var result: [String: String] = [:]
        func visit(_ relative: String) throws {
            let path = relative == "." ? root : root + "/" + relative
            guard let st = Disk.lstat(path) else { throw TestFailure("lstat \(path): errno \(errno)") }
            let time = nanoseconds ? "\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)" : "\(st.st_mtim.tv_sec)"
            let mode = String(st.st_mode & 0o7777, radix: 8)
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                result[relative] = "dir \(mode) \(time)"
                for name in try Disk.list(path) {
                    try visit(relative == "." ? name : relative + "/" + name)
                }
            case S_IFLNK:
                result[relative] = "link \(time) -> \(Disk.readLink(path) ?? "?")"
            default:
                result[relative] = "file \(mode) \(time) \(try Disk.read(path))"
            }
        }
        try visit(".")
        return result
    }
}
