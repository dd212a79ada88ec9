import CSyscalls
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `-o acl`: the kernel enforces the layers' POSIX ACLs and new entries inherit default ACLs,
/// as on kernel overlayfs (compared side by side). Without it, the mode bits alone decide.
final class ACLTests: XCTestCase {
    private var fx: MountFixture!

    override func setUpWithError() throws {
        fx = try MountFixture()
        // other users must reach the layers and the mount
        XCTAssertEqual(chmod(fx.root, 0o755), 0)
        try Disk.write(fx.inMain("f"), "secret\n", mode: 0o640)
        // user::rw- user:12346:r-- group::--- mask::r-- other::---
        try setACL(fx.inMain("f"), "system.posix_acl_access",
                   [(userObj, 6, any), (namedUser, 4, 12346), (groupObj, 0, any), (mask, 4, any), (other, 0, any)])
        try Disk.mkdir(fx.inMain("plain"))
        try Disk.mkdir(fx.inMain("shared"))
        // default: user::rwx user:12346:rwx group::r-x mask::rwx other::---
        try setACL(fx.inMain("shared"), "system.posix_acl_default",
                   [(userObj, 7, any), (namedUser, 7, 12346), (groupObj, 5, any), (mask, 7, any), (other, 0, any)])
    }

    override func tearDown() {
        fx.tearDown()
    }

    func testReadsAreAllowedAndRefusedByTheACLAsOnKernelOverlayfs() throws {
        let (mine, theirs) = try KernelOverlay.onBoth(fx, options: ["-o", "acl,allow_other"]) { root in
            try ["12346 no groups", "12345 group 0", "12345 no groups"].map { who in
                let parts = who.split(separator: " ")
                let groups = parts.last == "groups" ? [] : [UInt32(parts[2]) ?? 1]
                return who + ": " + (try read(root + "/f", as: UInt32(parts[0]) ?? 1, groups: groups))
            }
        }
        XCTAssertEqual(mine, theirs)
        // the named user's entry grants; the owning group's entry refuses, whatever the mask
        XCTAssertEqual(mine, ["12346 no groups: secret\n", "12345 group 0: refused", "12345 no groups: refused"])
        XCTAssertEqual(try fx.stats()["posix_acl"], "on")
    }

    func testNewEntriesGetTheUmaskOrTheDefaultACLAsOnKernelOverlayfs() throws {
        let (mine, theirs) = try KernelOverlay.onBoth(fx, options: ["-o", "acl"]) { root in
            let made = try Spawn.run("/bin/sh", ["-c", """
                umask 027 && cd '\(root)' && touch plain/file shared/file && mkdir plain/dir shared/dir \
                && mkfifo plain/fifo shared/fifo
                """])
            guard made.status == 0 else { throw TestFailure("making entries: \(made.error)") }
            // unnamed files (O_TMPFILE), named afterwards: the umask or the default ACL too
            let mask = umask(0o027)
            defer { umask(mask) }
            for directory in ["plain", "shared"] {
                let fd = open(root + "/" + directory, pb_O_TMPFILE | O_RDWR, 0o666)
                guard fd >= 0 else { throw TestFailure("O_TMPFILE in \(directory): errno \(errno)") }
                defer { close(fd) }
                guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, root + "/\(directory)/tmp", AT_SYMLINK_FOLLOW) == 0 else {
                    throw TestFailure("linkat \(directory)/tmp: errno \(errno)")
                }
            }
            return try ["plain/file", "plain/dir", "plain/fifo", "plain/tmp", "shared/file", "shared/dir", "shared/fifo",
                        "shared/tmp"].map { name in
                let st = try XCTUnwrap(Disk.lstat(root + "/" + name))
                let access = attribute(root + "/" + name, "system.posix_acl_access")
                let inherited = attribute(root + "/" + name, "system.posix_acl_default")
                return "\(name) \(String(st.st_mode & 0o7777, radix: 8)) \(access) \(inherited)"
            }
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(mine.map { $0.split(separator: " ").prefix(2).joined(separator: " ") },
                       ["plain/file 640", "plain/dir 750", "plain/fifo 640", "plain/tmp 640", "shared/file 660", "shared/dir 770",
                        "shared/fifo 660", "shared/tmp 660"])
    }

    /// chmod of a file with an ACL sets its mask (the group bits), which limits the named
    /// entries: the copy-up keeps the ACL and the file system rewrites it, as on kernel overlayfs.
    func testChmodOfAFileWithAnACLSetsItsMaskAsOnKernelOverlayfs() throws {
        let (mine, theirs) = try KernelOverlay.onBoth(fx, options: ["-o", "acl,allow_other"]) { root in
            var answers = [try read(root + "/f", as: 12346, groups: [])]
            guard chmod(root + "/f", 0o600) == 0 else { throw TestFailure("chmod: errno \(errno)") }
            let st = try XCTUnwrap(Disk.lstat(root + "/f"))
            answers.append(String(st.st_mode & 0o7777, radix: 8) + " " + attribute(root + "/f", "system.posix_acl_access"))
            answers.append(try read(root + "/f", as: 12346, groups: []))
            return answers
        }
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(mine.first, "secret\n")
        XCTAssertEqual(mine.last, "refused", "the mask now refuses the named user")
    }

    func testAnACLSetThroughTheMountIsEnforcedAtOnceAndLandsInTheSubstitution() throws {
        try Disk.write(fx.inMain("g"), "g\n", mode: 0o600)
        try fx.start(["-o", "acl,allow_other"])
        XCTAssertEqual(try read(fx.inMount("g"), as: 12346, groups: []), "refused")
        // user::rw- user:12346:r-- group::--- mask::r-- other::---
        try setACL(fx.inMount("g"), "system.posix_acl_access",
                   [(userObj, 6, any), (namedUser, 4, 12346), (groupObj, 0, any), (mask, 4, any), (other, 0, any)])
        XCTAssertEqual(try read(fx.inMount("g"), as: 12346, groups: []), "g\n")
        XCTAssertNotEqual(attribute(fx.inSubstitution("g"), "system.posix_acl_access"), "-", "the ACL is the copy's")
        XCTAssertEqual(attribute(fx.inMain("g"), "system.posix_acl_access"), "-", "main untouched")

        // changed behind the daemon's back, then .invalidate: enforced from then on
        try setACL(fx.inSubstitution("g"), "system.posix_acl_access",
                   [(userObj, 6, any), (namedUser, 0, 12346), (groupObj, 0, any), (mask, 0, any), (other, 0, any)])
        try Disk.write(fx.inMount(".invalidate"), "\n")
        XCTAssertEqual(try read(fx.inMount("g"), as: 12346, groups: []), "refused")
    }

    /// Without `-o acl` the kernel checks the mode bits alone, which the daemon shows within
    /// the ACL: a named user's entry grants nothing, and nobody gets what the layer refuses
    /// them (the owning group, whose entry refuses, read through the mask's bits before).
    func testWithoutTheOptionNobodyGetsWhatTheLayerRefuses() throws {
        // user::rw- user:12347:--- group::r-- mask::r-- other::r--
        try Disk.write(fx.inMain("o"), "open to others\n", mode: 0o644)
        try setACL(fx.inMain("o"), "system.posix_acl_access",
                   [(userObj, 6, any), (namedUser, 0, 12347), (groupObj, 4, any), (mask, 4, any), (other, 4, any)])
        try fx.start(["-o", "allow_other"])
        XCTAssertEqual(try fx.stats()["posix_acl"], "off")
        for (path, uid, groups) in [("f", UInt32(12345), [UInt32(0)]), ("o", 12347, [])] {
            XCTAssertEqual(try read(fx.inMain(path), as: uid, groups: groups), "refused", "the layer refuses \(uid) \(path)")
            XCTAssertEqual(try read(fx.inMount(path), as: uid, groups: groups), "refused", "so does the mount")
        }
        XCTAssertEqual(try read(fx.inMount("f"), as: 12346, groups: []), "refused", "a named entry grants nothing")
        XCTAssertEqual(Disk.lstat(fx.inMount("f")).map { $0.st_mode & 0o777 }, 0o600)
        XCTAssertEqual(Disk.lstat(fx.inMain("f")).map { $0.st_mode & 0o777 }, 0o640, "the layer keeps its mode")
    }

    // MARK: helpers

    private let userObj = PosixACL.userObj, namedUser = PosixACL.namedUser, groupObj = PosixACL.groupObj
    private let mask = PosixACL.mask, other = PosixACL.other, any = PosixACL.any

    private func setACL(_ path: String, _ name: String, _ entries: [(UInt16, UInt16, UInt32)]) throws {
        try PosixACL.set(path, name, entries)
    }

    /// The attribute's value in hex, or "-" when there is none.
    private func attribute(_ path: String, _ name: String) -> String {
        var value = [UInt8](repeating: 0, count: 256)
        let count = lgetxattr(path, name, &value, value.count)
        return count < 0 ? "-" : value.prefix(count).map { String(format: "%02x", $0) }.joined()
    }

    /// What `cat` prints reading `path` as user `uid` (its own group, and `groups`), or "refused".
    private func read(_ path: String, as uid: UInt32, groups: [UInt32]) throws -> String {
        let groupOption = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        let result = try Spawn.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", groupOption, "/bin/cat", path],
                                   seconds: 20)
        if result.status != 0 && result.error.contains("Permission denied") { return "refused" }
        guard result.status == 0 else { throw TestFailure("cat \(path) as \(uid): \(result.error)") }
        return result.output
    }
}
