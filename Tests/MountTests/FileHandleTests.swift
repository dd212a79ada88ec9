import CSyscalls
import Foundation
import XCTest

/// File handles (`name_to_handle_at`, `open_by_handle_at`: what fanotify watchers and NFS
/// re-exports use) keep opening the file they were taken on for as long as the mount lives:
/// after it is renamed, hard-linked, copied up, and after the kernel has dropped it from its
/// caches (the daemon then answers a lookup of "." by node ID) or `.invalidate` was written. A
/// removed file's handle answers ESTALE, unless the file is still open (then it opens it, as
/// xfstests' generic/467 checks). A directory's handle reconnects to its path (the
/// kernel looks up ".." for each ancestor). Compared with kernel overlayfs mounted
/// `nfs_export=on,index=on` on the same main bundle.
final class FileHandleTests: XCTestCase {
    /// The main bundle every test starts with.
    private func makeMain(_ fx: MountFixture) throws {
        for name in ["renamed", "linked", "copied", "removed", "kept", "held"] {
            try Disk.write(fx.inMain(name + ".txt"), name)
        }
        try Disk.write(fx.inMain("dir/sub/leaf.txt"), "leaf")
    }

    /// Takes handles on the mount at `root`, changes what they name through it, and says what
    /// each handle opens: as the kernel's caches are, after they are dropped, and after
    /// `invalidate` (then dropped again).
    private func exercise(_ root: String, invalidate: () throws -> Void) throws -> [String] {
        try Disk.write(root + "/made.txt", "made")
        try Disk.write(root + "/made-held.txt", "made-held")
        let names = ["renamed.txt", "linked.txt", "copied.txt", "removed.txt", "kept.txt", "made.txt", "dir/sub",
                     "held.txt", "made-held.txt"]
        var handles: [String: [UInt8]] = [:]
        for name in names { handles[name] = try Handles.take(root + "/" + name) }
        // removed while open: the open descriptors keep the files, and their handles open them
        let held = ["held.txt", "made-held.txt"].map { open(root + "/" + $0, O_RDONLY) }
        defer { held.forEach { close($0) } }
        for name in ["held.txt", "made-held.txt"] { XCTAssertEqual(unlink(root + "/" + name), 0) }
        XCTAssertEqual(Glibc.mkdir(root + "/moved", 0o755), 0)
        XCTAssertEqual(rename(root + "/renamed.txt", root + "/moved/renamed-now.txt"), 0)
        XCTAssertEqual(link(root + "/linked.txt", root + "/moved/linked-now.txt"), 0)
        XCTAssertEqual(unlink(root + "/linked.txt"), 0)
        let append = open(root + "/copied.txt", O_WRONLY | O_APPEND)
        XCTAssertEqual(Glibc.write(append, "+", 1), 1)
        close(append)
        XCTAssertEqual(unlink(root + "/removed.txt"), 0)
        XCTAssertEqual(rename(root + "/dir", root + "/dir-now"), 0, "errno \(errno)")
        var seen: [String] = []
        for stage in ["cached", "dropped", "invalidated"] {
            if stage == "invalidated" { try invalidate() }
            if stage != "cached" { try Handles.dropKernelCaches() }
            for name in names {
                guard let handle = handles[name] else { continue }
                seen.append("\(stage) \(name): " + Handles.describe(handle, in: root))
            }
        }
        return seen
    }

    private func expected(_ root: String) -> [String] {
        ["cached", "dropped", "invalidated"].flatMap { stage in
            ["renamed.txt: renamed", "linked.txt: linked", "copied.txt: copied+", "removed.txt: ESTALE", "kept.txt: kept",
             "made.txt: made", "dir/sub: directory \(root)/dir-now/sub", "held.txt: held",
             "made-held.txt: made-held"].map { "\(stage) \($0)" }
        }
    }

    func testHandlesSurviveRenameLinkCopyUpAndCacheDrops() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        try fx.start()
        let seen = try exercise(fx.mountpoint) { try Disk.write(fx.inMount(".invalidate"), "/\n") }
        XCTAssertEqual(seen, expected(fx.mountpoint))
    }

    /// The same on kernel overlayfs with nfs_export=on (index=on): what the mount must match.
    func testKernelOverlayfsWithNFSExportAgrees() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        let kernel = fx.root + "/kernel"
        defer { Unmounter.force(kernel) }
        try KernelOverlay.mountWritable(lowers: [fx.main], at: kernel, upper: fx.root + "/kernel-upper",
                                        extra: ",index=on,nfs_export=on,redirect_dir=on")
        let seen = try exercise(kernel) {}
        XCTAssertEqual(seen, expected(kernel))
    }

    /// A handle taken before a remount is not kept (node IDs start again): it answers ESTALE,
    /// never another file that got its node ID.
    func testRemountDoesNotKeepHandles() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        try fx.start()
        let old = try Handles.take(fx.inMount("kept.txt"))
        fx.stop()
        try fx.start()
        XCTAssertEqual(try Disk.read(fx.inMount("copied.txt")), "copied", "the first name the new mount looks up")
        XCTAssertEqual(Handles.describe(old, in: fx.mountpoint), "ESTALE")
        try Handles.dropKernelCaches()
        XCTAssertEqual(Handles.describe(old, in: fx.mountpoint), "ESTALE")
    }

    /// A node the kernel forgot is remembered by the daemon only while its file has a name:
    /// after a walk and a cache drop, a removed file's handle answers ESTALE, and the nodes of
    /// the removed files are gone from `.stats`.
    func testRemovedFilesAreNotRemembered() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        try fx.start()
        var handles: [[UInt8]] = []
        for index in 0..<50 {
            try Disk.write(fx.inMount("many/\(index)"), "\(index)")
            handles.append(try Handles.take(fx.inMount("many/\(index)")))
        }
        try Handles.dropKernelCaches()
        for index in 0..<50 where index % 2 == 0 { XCTAssertEqual(unlink(fx.inMount("many/\(index)")), 0) }
        try Handles.dropKernelCaches()
        for (index, handle) in handles.enumerated() {
            XCTAssertEqual(Handles.describe(handle, in: fx.mountpoint), index % 2 == 0 ? "ESTALE" : "\(index)")
        }
        let stats = try fx.stats()
        XCTAssertLessThanOrEqual(try fx.figure("forgotten_nodes"), 40, "the removed files' nodes went: \(stats)")
    }

    /// The handle of a file removed while open opens it for writing too when it is the
    /// substitution's (xfstests' open_by_handle -dka); a main-bundle file so removed stays as it
    /// is (ESTALE, as for any change to it).
    func testAnOpenRemovedFileIsWrittenThroughItsHandle() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        try fx.start()
        try Disk.write(fx.inMount("made.txt"), "made")
        var handles: [[UInt8]] = []
        var held: [Int32] = []
        defer { held.forEach { close($0) } }
        for name in ["made.txt", "kept.txt"] {
            handles.append(try Handles.take(fx.inMount(name)))
            held.append(open(fx.inMount(name), O_RDONLY))
            XCTAssertEqual(unlink(fx.inMount(name)), 0)
        }
        try Handles.dropKernelCaches()
        let mount = open(fx.mountpoint, O_RDONLY | O_DIRECTORY)
        defer { close(mount) }
        let fd = pb_open_by_handle(mount, &handles[0], O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0, "errno \(-fd)")
        XCTAssertEqual(Glibc.write(fd, "+", 1), 1)
        close(fd)
        XCTAssertEqual(try Disk.readAll(held[0]), "made+")
        XCTAssertEqual(pb_open_by_handle(mount, &handles[1], O_WRONLY), -ESTALE)
        XCTAssertEqual(Handles.describe(handles[1], in: fx.mountpoint), "kept")
    }

    /// A file replaced behind the daemon's back (another file renamed over its name in the main
    /// bundle) is another file: once invalidated, the old handle answers ESTALE, and the
    /// handle of a file left alone still opens it.
    func testAFileReplacedInTheLayersIsAnotherFile() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try makeMain(fx)
        try fx.start()
        let old = try Handles.take(fx.inMount("kept.txt"))
        let other = try Handles.take(fx.inMount("copied.txt"))
        try fx.replaceMainFile("kept.txt", with: "replaced")
        try Disk.write(fx.inMount(".invalidate"), "/\n")
        try Handles.dropKernelCaches()
        XCTAssertEqual(Handles.describe(old, in: fx.mountpoint), "ESTALE")
        XCTAssertEqual(Handles.describe(other, in: fx.mountpoint), "copied", "a file left alone")
        XCTAssertEqual(try Disk.read(fx.inMount("kept.txt")), "replaced")
        XCTAssertEqual(Handles.describe(try Handles.take(fx.inMount("kept.txt")), in: fx.mountpoint), "replaced")
    }
}

/// File handles through plain system calls.
enum Handles {
    /// The handle of `path` (not following a last symlink), as bytes.
    static func take(_ path: String) throws -> [UInt8] {
        var handle = [UInt8](repeating: 0, count: 136)
        let result = pb_name_to_handle(AT_FDCWD, path, &handle, handle.count, 0)
        guard result == 0 else { throw TestFailure("name_to_handle_at \(path): \(String(cString: strerror(-result)))") }
        return handle
    }

    /// What `handle` opens through the mount at `root`: the file's content, `directory PATH`
    /// (its path as /proc shows the descriptor), or the error's name.
    static func describe(_ handle: [UInt8], in root: String) -> String {
        let mount = open(root, O_RDONLY | O_DIRECTORY)
        guard mount >= 0 else { return "mount: errno \(errno)" }
        defer { close(mount) }
        var bytes = handle
        let fd = pb_open_by_handle(mount, &bytes, O_RDONLY)
        guard fd >= 0 else { return -fd == ESTALE ? "ESTALE" : String(cString: strerror(-fd)) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return "fstat: errno \(errno)" }
        if st.st_mode & S_IFMT == S_IFDIR {
            return "directory " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")) ?? "?")
        }
        return (try? Disk.readAll(fd)) ?? "unreadable"
    }

    /// Drops the kernel's unused dentries and inodes (the kernel sends FORGET for a FUSE
    /// mount's).
    static func dropKernelCaches() throws {
        let fd = open("/proc/sys/vm/drop_caches", O_WRONLY)
        guard fd >= 0 else { throw TestFailure("drop_caches: errno \(errno)") }
        defer { close(fd) }
        guard Glibc.write(fd, "2\n", 2) == 2 else { throw TestFailure("drop_caches: errno \(errno)") }
    }
}
