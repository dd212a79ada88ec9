import CSyscalls
import Foundation
import XCTest

/// Names made of every byte but "/" and NUL, invalid UTF-8, 255-byte names, `..`-like names;
/// symlinks in either layer that point outside it (absolute, relative, loops), and a
/// substitution that replaces a main directory with a symlink. The daemon must answer as a plain
/// file system would, never resolve a layer's symlink itself, and stay alive.
///
/// How a symlink-following daemon is caught: the mount is also bind-mounted one level deeper
/// (`ROOT/deep/view`), and every path through a symlink is used through that view. A relative
/// link `../sentinel` in the substitution's root, followed by the kernel (user-side, as POSIX
/// wants) from `ROOT/deep/view`, leads to `ROOT/deep/sentinel` (a decoy, which may be read and
/// written); resolved by the daemon inside the layer (`ROOT/patch/../sentinel`) it would lead
/// to `ROOT/sentinel`, whose secret must never be read and which must never change. A second
/// sentinel in /tmp is the target of absolute links, checked the same way for everything that
/// does not follow the link on the user's side.
final class HostileInputTests: XCTestCase {
    var fx: MountFixture!
    var binds: [String] = []
    /// Sentinel directories outside the fixture, removed after the test.
    var outside: [String] = []

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        for path in binds.reversed() where umount2(path, 0) != 0 { _ = umount2(path, Int32(MNT_DETACH)) }
        binds = []
        fx?.tearDown()
        for path in outside { try? FileManager.default.removeItem(atPath: path) }
    }

    // MARK: names

    /// Every byte but "/" and NUL, invalid UTF-8, control characters, `..`-like and long names.
    static let hostileNames: [[UInt8]] = {
        var names: [[UInt8]] = []
        for group in 0..<16 {  // each byte value once, sixteen to a name
            names.append((group * 16..<group * 16 + 16).map { UInt8($0) }.filter { $0 != 0 && $0 != 0x2F })
        }
        names += [[0xFF, 0xFE], [0x80], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80], [0x2E, 0xFF]]
        names += ["line\nbreak", "\n", "\t", "tab\there", "cr\rhere", " ", "  ", "...", "....", ". ", " ..", ".. ", " .",
                  "..a", "a..", "-", "--", "-rf", "*", "?", "\\", "~", ":", "\u{7F}", "é", "😀", "a\u{0}".dropLast() + "x"]
            .map { Array($0.utf8) }
        names += [251, 252, 255].map { [UInt8](repeating: UInt8(ascii: "L"), count: $0 - 3) + [UInt8($0 % 10) + 0x30, 0xFF, 0x01] }
        return names
    }()

    func testHostileNamesThroughTheMount() throws {
        try fx.start()
        XCTAssertEqual(mkdir(fx.inMount("names"), 0o755), 0)
        XCTAssertEqual(mkdir(fx.inMount("moved"), 0o755), 0)
        let names = HostileInputTests.hostileNames
        for name in names {
            let fd = Raw.call(fx.inMount("names"), name) { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o640) }
            XCTAssertGreaterThanOrEqual(fd, 0, "create \(Raw.show(name)): \(Raw.error())")
            if fd >= 0 {
                XCTAssertEqual(write(fd, Raw.content(name), Raw.content(name).count), Raw.content(name).count)
                close(fd)
            }
            // creating it again is EEXIST, also as a directory or symlink
            XCTAssertEqual(Raw.errno(fx.inMount("names"), name) { open($0, O_WRONLY | O_CREAT | O_EXCL, 0o640) }, EEXIST)
            XCTAssertEqual(Raw.errno(fx.inMount("names"), name) { mkdir($0, 0o755) }, EEXIST)
            XCTAssertEqual(Raw.errno(fx.inMount("names"), name) { symlink("t", $0) }, EEXIST)
        }
        XCTAssertEqual(Raw.list(fx.inMount("names")), Set(names), "readdir shows every name once, byte for byte")
        XCTAssertEqual(Raw.list(fx.inSubstitution("names")), Set(names), "the substitution holds the same bytes")
        for name in names {
            var st = stat()
            XCTAssertEqual(Raw.call(fx.inMount("names"), name) { lstat($0, &st) }, 0, "lstat \(Raw.show(name))")
            XCTAssertEqual(st.st_mode, S_IFREG | 0o640, Raw.show(name))
            XCTAssertEqual(Raw.read(fx.inMount("names"), name), Raw.content(name), "read \(Raw.show(name))")
            let moved = Raw.call(fx.inMount("names"), name) { from in
                Raw.call(fx.inMount("moved"), name) { to in rename(from, to) }
            }
            XCTAssertEqual(moved, 0, "rename \(Raw.show(name)): \(Raw.error())")
        }
        XCTAssertEqual(Raw.list(fx.inMount("names")), [])
        XCTAssertEqual(Raw.list(fx.inMount("moved")), Set(names))
        for name in names {
            XCTAssertEqual(Raw.read(fx.inMount("moved"), name), Raw.content(name), "read after rename \(Raw.show(name))")
            XCTAssertEqual(Raw.call(fx.inMount("moved"), name) { unlink($0) }, 0, "unlink \(Raw.show(name))")
        }
        XCTAssertEqual(Raw.list(fx.inMount("moved")), [])
        XCTAssertEqual(Raw.list(fx.inSubstitution("moved")), [], "nothing left behind")
        // `.wh.` names cannot be made, whatever follows the prefix
        for name in [".wh.", ".wh.\n", ".wh.\u{FF}", ".wh...", ".wh..wh..opq"].map({ Array($0.utf8) }) {
            XCTAssertEqual(Raw.errno(fx.mountpoint, name) { open($0, O_WRONLY | O_CREAT, 0o644) }, EPERM, Raw.show(name))
            XCTAssertEqual(Raw.errno(fx.mountpoint, name) { mkdir($0, 0o755) }, EPERM, Raw.show(name))
            XCTAssertEqual(Raw.errno(fx.mountpoint, name) { symlink("x", $0) }, EPERM, Raw.show(name))
            XCTAssertEqual(Raw.errno(fx.mountpoint, name) { mknod($0, S_IFIFO | 0o644, 0) }, EPERM, Raw.show(name))
            XCTAssertEqual(Raw.errno(fx.mountpoint, name) { lstatErrno($0) }, ENOENT, Raw.show(name))
        }
        // "." and ".." are never entries: making them is EEXIST, removing them EINVAL/ENOTEMPTY
        XCTAssertEqual(Raw.errno(fx.mountpoint, Array("..".utf8)) { mkdir($0, 0o755) }, EEXIST)
        XCTAssertEqual(Raw.errno(fx.inMount("moved"), Array(".".utf8)) { rmdir($0) }, EINVAL)
        try assertAlive()
    }

    func testHostileNamesOnDiskInBothLayers() throws {
        let names = HostileInputTests.hostileNames
        try Disk.mkdir(fx.inMain("d"))
        try Disk.mkdir(fx.inSubstitution("d"))
        for (index, name) in names.enumerated() {
            if index % 3 != 1 { try Raw.write(fx.inMain("d"), name, "main:" + Raw.show(name)) }
            if index % 3 != 0 { try Raw.write(fx.inSubstitution("d"), name, "patch:" + Raw.show(name)) }
        }
        // a hostile name hidden by a whiteout in the substitution
        let hidden = names[6]  // main only
        try Raw.write(fx.inSubstitution("d"), Array(".wh.".utf8) + hidden, "")
        // `.wh.` names in the main bundle are never shown; docs/MERGED-VIEW.md has the substitution's
        // whiteouts hide main's entries, so main's own `.wh.` files and markers hide nothing
        try Disk.write(fx.inMain("d/mainonly"), "main only")
        try Disk.write(fx.inMain("d/.wh.mainonly"), "")
        try Disk.write(fx.inMain("d/.wh.\u{FF}"), "")
        try Disk.write(fx.inMain("mopq/keep"), "kept")
        try Disk.opaque(fx.inMain("mopq"))
        try fx.start()

        var expected = Set(names).subtracting([hidden])
        expected.insert(Array("mainonly".utf8))
        XCTAssertEqual(Raw.describe(Raw.list(fx.inMount("d")), expected), "", "the merged listing of hostile names")
        for (index, name) in names.enumerated() where name != hidden {
            let layer = index % 3 == 0 ? "main:" : "patch:"
            XCTAssertEqual(Raw.read(fx.inMount("d"), name), Array((layer + Raw.show(name)).utf8), "read \(Raw.show(name))")
        }
        XCTAssertEqual(Raw.errno(fx.inMount("d"), hidden) { lstatErrno($0) }, ENOENT)
        XCTAssertEqual(try Disk.read(fx.inMount("d/mainonly")), "main only")
        XCTAssertEqual(Disk.lstatError(fx.inMount("d/.wh.mainonly")), ENOENT)
        XCTAssertEqual(try Disk.list(fx.inMount("mopq")), ["keep"])
        XCTAssertEqual(try Disk.read(fx.inMount("mopq/keep")), "kept")

        // kernel overlayfs with the substitution above, whiteout-free, agrees on names and content
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountReadOnly(lowers: [fx.inSubstitution("d"), fx.inMain("d")], at: kernel)
        binds.append(kernel)
        let theirs = Raw.list(kernel).filter { !$0.starts(with: Array(".wh.".utf8)) }
        XCTAssertFalse(theirs.isEmpty, "kernel overlayfs shows nothing")
        XCTAssertEqual(Raw.describe(Raw.list(fx.inMount("d")), Set(theirs).subtracting([hidden])), "", "as kernel overlayfs")
        for name in theirs where name != hidden {
            XCTAssertEqual(Raw.read(fx.inMount("d"), name), Raw.read(kernel, name), Raw.show(name))
        }

        // unlink through the mount, in main, the substitution or both; a name of more than 251
        // bytes gets a whiteout device (see NameLengthTests)
        for (index, name) in names.enumerated() where name != hidden {
            let error = Raw.errno(fx.inMount("d"), name) { unlink($0) }
            let where_ = index % 3 == 0 ? "main" : index % 3 == 1 ? "patch" : "both"
            XCTAssertEqual(error, 0, "unlink \(Raw.show(name)) (\(where_)): \(String(cString: strerror(error)))")
        }
        XCTAssertEqual(Raw.describe(Raw.list(fx.inMount("d")), [Array("mainonly".utf8)]), "")
        try assertAlive()
    }

    /// statfs reports the substitution's name limit (255), as kernel overlayfs does; the main
    /// bundle's names up to it are shown, and can be removed and renamed (a name too long for
    /// `.wh.` is whited out with a device); 256 bytes is ENAMETOOLONG everywhere.
    func testNameLengthLimits() throws {
        let long255 = String(repeating: "m", count: 255), long252 = String(repeating: "n", count: 252)
        let long251 = String(repeating: "o", count: 251)
        for name in [long255, long252, long251] { try Disk.write(fx.inMain(name), "main \(name.count)") }
        try fx.start()
        var mount = statvfs(), patch = statvfs()
        XCTAssertEqual(statvfs(fx.mountpoint, &mount), 0)
        XCTAssertEqual(statvfs(fx.substitution, &patch), 0)
        XCTAssertEqual(mount.f_namemax, patch.f_namemax)
        XCTAssertEqual(pathconf(fx.mountpoint, Int32(_PC_NAME_MAX)), Int(patch.f_namemax))
        let tooLong = fx.inMount(String(repeating: "x", count: 256))
        XCTAssertEqual(Disk.lstatError(tooLong), ENAMETOOLONG)
        XCTAssertEqual(open(tooLong, O_WRONLY | O_CREAT, 0o644), -1)
        XCTAssertEqual(errno, ENAMETOOLONG)
        XCTAssertEqual(symlink("t", tooLong), -1)
        XCTAssertEqual(errno, ENAMETOOLONG)
        XCTAssertEqual(rename(fx.inMount(long251), tooLong), -1)
        XCTAssertEqual(errno, ENAMETOOLONG)
        // main's long names are shown and readable
        XCTAssertEqual(Set(try Disk.list(fx.mountpoint)), [long255, long252, long251])
        for name in [long255, long252, long251] { XCTAssertEqual(try Disk.read(fx.inMount(name)), "main \(name.count)") }
        XCTAssertEqual(unlink(fx.inMount(long251)), 0)
        XCTAssertEqual(unlink(fx.inMount(long255)), 0, "errno \(errno)")
        XCTAssertEqual(rename(fx.inMount(long252), fx.inMount("short")), 0, "errno \(errno)")
        XCTAssertEqual(Set(try Disk.list(fx.mountpoint)), ["short"])
        XCTAssertEqual(try Disk.read(fx.inMount("short")), "main 252")
        var st = stat()
        for name in [long255, long252] {
            XCTAssertEqual(lstat(fx.inSubstitution(name), &st), 0, "the whiteout device of \(name.count) bytes")
            XCTAssertEqual(st.st_mode & S_IFMT, S_IFCHR)
            XCTAssertEqual(st.st_rdev, 0)
        }
        XCTAssertEqual(lstat(fx.inSubstitution(".wh." + long251), &st), 0, "a name that fits gets an OCI whiteout")
        try assertAlive()
    }

    // MARK: symlinks

    func testSymlinksInEitherLayerNeverLeadTheDaemonOutside() throws {
        let layout = try Containment(fx)
        outside.append(layout.tmp)
        // the substitution replaces main directories with links out of the layer
        try Disk.write(fx.inMain("dir/x"), "main's dir/x")
        try Disk.write(fx.inMain("dir/y"), "main's dir/y")
        try Disk.symlink(fx.inSubstitution("dir"), to: "../sentinel")
        try Disk.write(fx.inMain("etcdir/passwd"), "main's passwd")
        try Disk.symlink(fx.inSubstitution("etcdir"), to: "/etc")
        try Disk.write(fx.inMain("a/b/x"), "main's a/b/x")
        try Disk.mkdir(fx.inSubstitution("a"))
        try Disk.symlink(fx.inSubstitution("a/b"), to: "../../sentinel")
        // a substitution directory over a main symlink to the outside: not merged with it
        try Disk.symlink(fx.inMain("m"), to: "../sentinel")
        try Disk.write(fx.inSubstitution("m/own"), "patch's m/own")
        // links to files, absolute and relative, in both layers, and loops
        try Disk.symlink(fx.inSubstitution("wlink"), to: "../sentinel/x")
        try Disk.symlink(fx.inMain("mwlink"), to: "../sentinel/x")
        try Disk.symlink(fx.inSubstitution("tabs"), to: layout.tmp + "/x")
        try Disk.symlink(fx.inMain("mtabs"), to: layout.tmp + "/x")
        try Disk.symlink(fx.inMain("mtdir"), to: layout.tmp)
        try Disk.symlink(fx.inSubstitution("up"), to: "../../../../../../../..")
        try Disk.symlink(fx.inSubstitution("loop1"), to: "loop2")
        try Disk.symlink(fx.inSubstitution("loop2"), to: "loop1")
        try Disk.symlink(fx.inMain("self"), to: "self")
        try Disk.write(fx.inMain("plain"), "plain file")
        try fx.start()
        let view = try layout.bindView()
        binds.append(view)
        let before = layout.snapshot()

        // the daemon shows each link as a link, with its target verbatim
        for (name, target) in [("dir", "../sentinel"), ("etcdir", "/etc"), ("a/b", "../../sentinel"), ("wlink", "../sentinel/x"),
                               ("mwlink", "../sentinel/x"), ("tabs", layout.tmp + "/x"), ("loop1", "loop2"), ("self", "self")] {
            XCTAssertEqual(Disk.lstat(view + "/" + name).map { $0.st_mode & S_IFMT }, S_IFLNK, name)
            XCTAssertEqual(Disk.readLink(view + "/" + name), target, name)
        }
        XCTAssertEqual(Raw.types(view)["dir"], UInt8(DT_LNK), "readdir's d_type of a link over a main directory")
        XCTAssertEqual(Raw.types(view + "/a")["b"], UInt8(DT_LNK))
        XCTAssertEqual(Disk.lstat(view + "/m").map { $0.st_mode & S_IFMT }, S_IFDIR)
        XCTAssertEqual(try Disk.list(view + "/m"), ["own"], "a substitution directory does not merge with a main link")

        // through a link the kernel follows it from the view: the decoy, never main's directory
        XCTAssertEqual(Set(try Disk.list(view + "/dir")), Set(try Disk.list(layout.decoy)))
        XCTAssertEqual(Set(try Disk.list(view + "/a/b")), Set(try Disk.list(layout.decoy)))
        XCTAssertEqual(try Disk.read(view + "/dir/x"), layout.decoyText)
        XCTAssertEqual(try Disk.read(view + "/a/b/x"), layout.decoyText)
        XCTAssertEqual(try Disk.read(view + "/wlink"), layout.decoyText)
        XCTAssertEqual(try Disk.read(view + "/mwlink"), layout.decoyText)
        XCTAssertEqual(Disk.lstatError(view + "/dir/y"), ENOENT, "main's dir/y is hidden by the link")
        XCTAssertEqual(Set(try Disk.list(view + "/etcdir")), Set(try Disk.list("/etc")))
        // the mount itself has nothing of main's shadowed directories
        for (path, _) in try Probe.walk(fx.mountpoint) {
            XCTAssertFalse(path.hasPrefix("dir/") || path.hasPrefix("a/b/") || path.hasPrefix("etcdir/"), path)
        }

        // errors a plain file system gives
        XCTAssertEqual(open(view + "/wlink", O_RDONLY | O_NOFOLLOW), -1)
        XCTAssertEqual(errno, ELOOP)
        XCTAssertEqual(open(view + "/mtabs", O_RDONLY | O_NOFOLLOW), -1)
        XCTAssertEqual(errno, ELOOP)
        XCTAssertEqual(open(view + "/dir", O_RDONLY | O_NOFOLLOW | O_DIRECTORY), -1)
        XCTAssertEqual(errno, ENOTDIR, "as on a plain file system: a link is no directory")
        let pathFD = open(view + "/wlink", pb_O_PATH | O_NOFOLLOW)
        XCTAssertGreaterThanOrEqual(pathFD, 0)
        if pathFD >= 0 { close(pathFD) }
        for loop in ["loop1", "loop2", "self"] {
            XCTAssertEqual(open(view + "/" + loop, O_RDONLY), -1)
            XCTAssertEqual(errno, ELOOP, loop)
            var st = stat()
            XCTAssertEqual(stat(view + "/" + loop, &st), -1)
            XCTAssertEqual(errno, ELOOP, loop)
            XCTAssertEqual(open(view + "/" + loop, O_WRONLY | O_CREAT | O_EXCL, 0o644), -1)
            XCTAssertEqual(errno, EEXIST, loop)
        }
        XCTAssertEqual(open(view + "/plain/x", O_RDONLY), -1)
        XCTAssertEqual(errno, ENOTDIR)
        XCTAssertEqual(mkdir(view + "/plain/x", 0o755), -1)
        XCTAssertEqual(errno, ENOTDIR)
        let viewFD = open(view, O_RDONLY | O_DIRECTORY)
        defer { close(viewFD) }
        XCTAssertEqual(openat(viewFD, "tabs", O_RDONLY | O_NOFOLLOW), -1)
        XCTAssertEqual(errno, ELOOP)

        // reads: every path of the mount, links followed where they stay in the fixture
        let readable = layout.followingWalk(view)
        XCTAssertGreaterThan(readable.count, 3)
        for (path, content) in readable {
            XCTAssertFalse(content.contains(layout.secret), "\(path) served the fixture's sentinel")
            XCTAssertFalse(content.contains(layout.tmpSecret), "\(path) served the /tmp sentinel")
        }

        // changes the daemon makes on the links themselves (never on their targets)
        let now = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        for name in ["wlink", "mwlink", "tabs", "mtabs", "mtdir", "dir", "self", "loop1"] {
            XCTAssertEqual(lchown(view + "/" + name, 1234, 1234), 0, "lchown \(name): \(Raw.error())")
            XCTAssertEqual(utimensat(AT_FDCWD, view + "/" + name, now, AT_SYMLINK_NOFOLLOW), 0, "utimensat \(name): \(Raw.error())")
            XCTAssertEqual(lsetxattr(view + "/" + name, "user.test", "v", 1, 0), -1, name)
            XCTAssertEqual(errno, EPERM, "user xattrs on a symlink: \(name)")
            XCTAssertEqual(lsetxattr(view + "/" + name, "trusted.test", "v", 1, 0), 0, "trusted xattr on link \(name): \(Raw.error())")
            XCTAssertEqual(Disk.lstat(view + "/" + name)?.st_uid, 1234, name)
            XCTAssertEqual(Disk.lstat(fx.inSubstitution(name)).map { $0.st_mode & S_IFMT }, S_IFLNK, "the copy of \(name) is a link")
        }
        XCTAssertEqual(Disk.readLink(fx.inSubstitution("mwlink")), "../sentinel/x", "a copied-up link keeps its target")
        XCTAssertEqual(Disk.readLink(fx.inSubstitution("mtdir")), layout.tmp)
        // changes the kernel makes through the links, on the user's side: only the decoy changes
        XCTAssertEqual(chmod(view + "/wlink", 0o600), 0)
        XCTAssertEqual(truncate(view + "/mwlink", 3), 0)
        XCTAssertEqual(setxattr(view + "/wlink", "user.test", "v", 1, 0), 0)
        try Disk.write(view + "/dir/created", "through the link")
        XCTAssertEqual(mkdir(view + "/a/b/madedir", 0o755), 0)
        XCTAssertEqual(rename(view + "/plain", view + "/dir/plain"), -1, "a rename out of the mount")
        XCTAssertEqual(errno, EXDEV)
        XCTAssertEqual(link(view + "/plain", view + "/dir/plain"), -1)
        XCTAssertEqual(errno, EXDEV)
        // removing and renaming the links removes and renames the links
        XCTAssertEqual(rename(view + "/wlink", view + "/wlink2"), 0)
        XCTAssertEqual(rename(view + "/mtdir", view + "/mtdir2"), 0)
        XCTAssertEqual(unlink(view + "/dir"), 0)
        XCTAssertEqual(unlink(view + "/mtabs"), 0)
        XCTAssertEqual(unlink(view + "/self"), 0)
        XCTAssertEqual(Disk.readLink(view + "/mtdir2"), layout.tmp)
        // with the link gone, main's dir stays hidden (a whiteout), and a new directory is empty
        XCTAssertEqual(Disk.lstatError(view + "/dir"), ENOENT)
        XCTAssertEqual(mkdir(view + "/dir", 0o755), 0)
        XCTAssertEqual(try Disk.list(view + "/dir"), [])
        try Disk.write(view + "/dir/inside", "inside")
        XCTAssertEqual(try Disk.read(fx.inSubstitution("dir/inside")), "inside")

        XCTAssertEqual(layout.snapshot(), before, "a sentinel changed")
        XCTAssertEqual(try Disk.read(layout.decoy + "/created"), "through the link", "the kernel wrote through the link")
        try assertAlive()
    }

    /// The substitution changed behind the daemon's back (no `.invalidate`): a directory it
    /// knows is replaced on disk by a link out of the layer. Writes through the mount that land
    /// in that directory must fail rather than follow the link.
    func testSubstitutionDirectorySwappedForALinkBehindTheDaemonsBack() throws {
        let layout = try Containment(fx)
        outside.append(layout.tmp)
        try Disk.write(fx.inMain("cdir/file"), "main's cdir/file")
        try Disk.write(fx.inMain("cdir/other"), "main's other")
        try Disk.write(fx.inSubstitution("pdir/own"), "patch's own")
        try Disk.write(fx.inMain("pdir/mainfile"), "main's pdir/mainfile")
        try Disk.write(fx.inMain("deep/er/file"), "main's deep/er/file")
        try fx.start()
        // the kernel and the daemon learn every name
        for path in ["cdir/file", "cdir/other", "pdir/own", "pdir/mainfile", "deep/er/file"] {
            XCTAssertNotNil(try? Disk.read(fx.inMount(path)), path)
        }
        let before = layout.snapshot()
        // now an intruder puts links out of the layer where the daemon expects directories
        try FileManager.default.moveItem(atPath: fx.inSubstitution("pdir"), toPath: fx.root + "/pdir.old")
        try Disk.symlink(fx.inSubstitution("pdir"), to: "../sentinel")
        try Disk.symlink(fx.inSubstitution("cdir"), to: "../sentinel")
        try Disk.mkdir(fx.inSubstitution("deep"))
        try Disk.symlink(fx.inSubstitution("deep/er"), to: "../../sentinel")

        var outcomes: [String: Int32] = [:]
        func attempt(_ label: String, _ body: () -> Int32) { outcomes[label] = body() == 0 ? 0 : errno }
        attempt("copy-up into a linked parent") { truncate(fx.inMount("cdir/file"), 1) }
        attempt("append into a linked parent") { Syscalls.appendAndSync(fx.inMount("cdir/other"), Array("+".utf8)) }
        attempt("create in a linked directory") { Syscalls.createAndSync(fx.inMount("pdir/new"), Array("new".utf8)) }
        attempt("write to a file of a linked directory") { Syscalls.appendAndSync(fx.inMount("pdir/own"), Array("+".utf8)) }
        attempt("copy-up below a linked grandparent") { chmod(fx.inMount("deep/er/file"), 0o600) }
        attempt("mkdir in a linked directory") { mkdir(fx.inMount("pdir/newdir"), 0o755) }
        attempt("unlink in a linked directory") { unlink(fx.inMount("cdir/other")) }
        attempt("rename into a linked directory") { rename(fx.inMount("pdir/mainfile"), fx.inMount("cdir/moved")) }
        attempt("setxattr in a linked directory") { setxattr(fx.inMount("pdir/own"), "user.x", "v", 1, 0) }
        for path in ["pdir/own", "cdir/file", "deep/er/file", "pdir/mainfile"] {
            XCTAssertFalse(((try? Disk.read(fx.inMount(path))) ?? "").contains(layout.secret), "\(path) served the sentinel")
        }
        print("writes after a directory became a link behind the daemon's back: "
              + outcomes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value == 0 ? "ok" : String(cString: strerror($0.value)))" }
                  .joined(separator: "; "))
        XCTAssertEqual(layout.snapshot(), before, "the daemon followed a link out of the substitution")
        XCTAssertFalse(outcomes.values.contains(EIO), "EIO for a link in a layer: \(outcomes)")
        // after an invalidation the mount shows the links as links
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(Disk.lstat(fx.inMount("cdir")).map { $0.st_mode & S_IFMT }, S_IFLNK)
        XCTAssertEqual(Disk.lstat(fx.inMount("deep/er")).map { $0.st_mode & S_IFMT }, S_IFLNK)
        XCTAssertEqual(layout.snapshot(), before)
        try assertAlive()
    }

    // MARK: helpers

    private func assertAlive(file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertTrue(fx.isMounted, "the mount is gone", file: file, line: line)
        XCTAssertNil(fx.exited(), "the daemon died: \(fx.log)", file: file, line: line)
        var st = statvfs()
        XCTAssertEqual(statvfs(fx.mountpoint, &st), 0, "the mount does not answer", file: file, line: line)
        XCTAssertNoThrow(try Disk.list(fx.mountpoint), file: file, line: line)
    }
}

private func lstatErrno(_ path: UnsafePointer<CChar>) -> Int32 {
    var st = stat()
    return lstat(path, &st)
}

/// The sentinels and the deeper view of the mount (see HostileInputTests).
struct Containment {
    let fx: MountFixture
    /// Reached only by a daemon that resolves `../sentinel` inside a layer.
    let sentinel: String
    let secret = "fixture-sentinel-\(UInt64.random(in: 0...UInt64.max))"
    /// What the kernel reaches following `../sentinel` from the view.
    let decoy: String
    let decoyText = "decoy reached through the kernel"
    /// Outside the fixture, target of absolute links.
    let tmp: String
    let tmpSecret = "tmp-sentinel-\(UInt64.random(in: 0...UInt64.max))"

    init(_ fx: MountFixture) throws {
        self.fx = fx
        sentinel = fx.root + "/sentinel"
        decoy = fx.root + "/deep/sentinel"
        var template = Array("/tmp/pb-sentinel-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp: errno \(errno)") }
        tmp = String(cString: made)
        for dir in [sentinel, tmp] {
            try Disk.write(dir + "/x", dir == tmp ? tmpSecret : secret)
            try Disk.write(dir + "/file", dir == tmp ? tmpSecret : secret)
            try Disk.write(dir + "/other", dir == tmp ? tmpSecret : secret)
            try Disk.write(dir + "/own", dir == tmp ? tmpSecret : secret)
            try Disk.mkdir(dir + "/sub")
            try Disk.write(dir + "/sub/y", dir == tmp ? tmpSecret : secret)
            var old = [timespec(tv_sec: 1_234_567_890, tv_nsec: 0), timespec(tv_sec: 1_234_567_890, tv_nsec: 0)]
            for path in [dir + "/x", dir + "/sub", dir] { _ = utimensat(AT_FDCWD, path, &old, 0) }
        }
        try Disk.write(decoy + "/x", decoyText)
        try Disk.write(decoy + "/file", decoyText)
    }

    /// The mount bind-mounted at `ROOT/deep/view`, one level deeper than the layers.
    func bindView() throws -> String {
        let view = fx.root + "/deep/view"
        try Disk.mkdir(view)
        guard mount(fx.mountpoint, view, nil, UInt(MS_BIND), nil) == 0 else { throw TestFailure("bind mount: errno \(errno)") }
        return view
    }

    /// Both sentinels: every entry's type, mode, owner, size, content, mtime and ctime, and the
    /// directories' own.
    func snapshot() -> [String: String] {
        var result: [String: String] = [:]
        for dir in [sentinel, tmp] {
            for (path, st) in (try? Probe.walk(dir)) ?? [:] {
                result[dir + "/" + path] = Containment.line(dir + "/" + path, st)
            }
            if let st = Disk.lstat(dir) { result[dir] = Containment.line(dir, st) }
        }
        return result
    }

    private static func line(_ path: String, _ st: stat) -> String {
        var text = "\(st.st_mode) \(st.st_uid):\(st.st_gid) \(st.st_size) m\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
            + " c\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
        if st.st_mode & S_IFMT == S_IFREG { text += " " + ((try? Disk.read(path)) ?? "?") }
        return text
    }

    /// Every regular file reachable from `root`, following links whose target stays inside
    /// the fixture (find -L, without leaving it): path -> content.
    func followingWalk(_ root: String) -> [String: String] {
        var seen = Set<String>()
        var result: [String: String] = [:]
        func visit(_ path: String, depth: Int) {
            guard depth < 8 else { return }
            var st = stat()
            guard stat(path, &st) == 0 else { return }  // dangling links and loops
            guard let real = realpath(path, nil) else { return }
            let resolved = String(cString: real)
            free(real)
            guard resolved.hasPrefix(fx.root + "/"), seen.insert("\(st.st_dev):\(st.st_ino):\(path.count)").inserted else { return }
            if st.st_mode & S_IFMT == S_IFREG {
                result[path] = (try? Disk.read(path)) ?? ""
                // also O_NOFOLLOW when the path itself is no link
                let fd = open(path, O_RDONLY | O_NOFOLLOW)
                if fd >= 0 { close(fd) }
            } else if st.st_mode & S_IFMT == S_IFDIR {
                for name in (try? Disk.list(path)) ?? [] { visit(path + "/" + name, depth: depth + 1) }
            }
        }
        visit(root, depth: 0)
        return result
    }
}

/// System calls on names given as bytes (not necessarily UTF-8).
enum Raw {
    static func call<T>(_ dir: String, _ name: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        let bytes = Array(dir.utf8) + [0x2F] + name + [0]
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// errno of a call that fails, 0 if it succeeds.
    static func errno(_ dir: String, _ name: [UInt8], _ body: (UnsafePointer<CChar>) -> Int32) -> Int32 {
        let result = call(dir, name, body)
        if result >= 0 { close(result > 2 ? result : -1) }
        return result < 0 ? Glibc.errno : 0
    }

    /// "" when equal, else the names missing and extra.
    static func describe(_ shown: Set<[UInt8]>, _ expected: Set<[UInt8]>) -> String {
        let missing = expected.subtracting(shown).map(show).sorted(), extra = shown.subtracting(expected).map(show).sorted()
        return missing.isEmpty && extra.isEmpty ? "" : "missing \(missing), extra \(extra)"
    }

    static func error() -> String { String(cString: strerror(Glibc.errno)) }

    static func content(_ name: [UInt8]) -> [UInt8] { Array(("content of " + show(name)).utf8) }

    static func show(_ name: [UInt8]) -> String {
        name.count > 40 ? "\(name.count) bytes" : name.map { String(format: "%02x", $0) }.joined()
    }

    static func write(_ dir: String, _ name: [UInt8], _ text: String) throws {
        let fd = call(dir, name) { open($0, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
        guard fd >= 0 else { throw TestFailure("create \(show(name)) in \(dir): errno \(Glibc.errno)") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard Glibc.write(fd, bytes, bytes.count) == bytes.count else { throw TestFailure("write: errno \(Glibc.errno)") }
    }

    static func read(_ dir: String, _ name: [UInt8]) -> [UInt8]? {
        let fd = call(dir, name) { open($0, O_RDONLY) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n <= 0 { return n == 0 ? data : nil }
            data.append(contentsOf: chunk[..<n])
        }
    }

    /// The names of a directory as bytes, without "." and "..".
    static func list(_ dir: String) -> Set<[UInt8]> { Set(entries(dir).map(\.name)) }

    static func types(_ dir: String) -> [String: UInt8] {
        Dictionary(entries(dir).map { (String(decoding: $0.name, as: UTF8.self), $0.type) }, uniquingKeysWith: { a, _ in a })
    }

    private static func entries(_ dir: String) -> [(name: [UInt8], type: UInt8)] {
        guard let stream = opendir(dir) else { return [] }
        defer { closedir(stream) }
        var result: [(name: [UInt8], type: UInt8)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            result.append((name, entry.pointee.d_type))
        }
        return result
    }
}
