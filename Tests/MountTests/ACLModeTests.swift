import CSyscalls
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// How ACLs and the mode bits meet, without `-o acl` (the default) as with it, compared with
/// kernel overlayfs: what xfstests generic/375, 389 and 697 check.
final class ACLModeTests: XCTestCase {
    /// generic/375: the owner's minimal ACL (`setfacl -m u::rwx,g::rwx,o::rwx`) sets the mode's
    /// permission bits; set-group-ID stays for a member of the file's group and goes for
    /// anyone else; for a file and a directory.
    func testTheOwnersACLSetsTheModeAndClearsSetGroupIDForANonMember() throws {
        for options in [["-o", "allow_other"], ["-o", "acl,allow_other"]] {
            let fx = try MountFixture(name)
            defer { fx.tearDown() }
            XCTAssertEqual(chmod(fx.root, 0o755), 0)
            let (mine, theirs) = try KernelOverlay.onBoth(fx, options: options) { root in
                var shown: [String] = []
                for name in ["file", "dir"] {
                    let path = root + "/" + name
                    if name == "dir" { try Disk.mkdir(path) } else { try Disk.write(path, "") }
                    guard chown(path, 100, 100) == 0 else { throw TestFailure("chown \(path): errno \(errno)") }
                    for gid: UInt32 in [100, 101] {
                        guard chmod(path, 0o2755) == 0 else { throw TestFailure("chmod \(path): errno \(errno)") }
                        let error = try PosixACL.set(path, PosixACL.minimal(7, 7, 7), as: 100, gid: gid)
                        shown.append("\(name) by group \(gid): " + (error.isEmpty ? try modeText(path) : error))
                    }
                }
                return shown
            }
            XCTAssertEqual(mine, theirs, "\(options)")
            XCTAssertEqual(mine, ["file by group 100: -rwxrwsrwx", "file by group 101: -rwxrwxrwx",
                                  "dir by group 100: drwxrwsrwx", "dir by group 101: drwxrwxrwx"], "\(options)")
        }
    }

    /// generic/389 and 697: in a directory with a default ACL, the ACL and not the umask decides
    /// a new entry's bits (group-execute too): a file, a directory, a FIFO, and an O_TMPFILE
    /// file named by linkat; in a set-group-ID directory as well.
    func testADefaultACLAndNotTheUmaskDecidesANewEntrysMode() throws {
        for options in [[], ["-o", "acl"]] {
            let fx = try MountFixture(name)
            defer { fx.tearDown() }
            for directory in ["acl", "setgid"] {
                try Disk.mkdir(fx.inMain(directory))
                // default: user::rwx group::rwx other::r-x
                try PosixACL.set(fx.inMain(directory), "system.posix_acl_default", PosixACL.minimal(7, 7, 5))
            }
            XCTAssertEqual(chmod(fx.inMain("setgid"), 0o2777), 0)
            let (mine, theirs) = try KernelOverlay.onBoth(fx, options: options) { root in
                let mask = umask(0o032)
                defer { umask(mask) }
                var shown: [String] = []
                for directory in ["acl", "setgid"] {
                    let at = root + "/" + directory
                    guard close(open(at + "/file", O_CREAT | O_EXCL | O_WRONLY, 0o666)) == 0, mkdir(at + "/dir", 0o777) == 0,
                          mkfifo(at + "/fifo", 0o666) == 0 else { throw TestFailure("making in \(at): errno \(errno)") }
                    let fd = open(at, pb_O_TMPFILE | O_RDWR, 0o666)
                    guard fd >= 0 else { throw TestFailure("O_TMPFILE in \(at): errno \(errno)") }
                    defer { close(fd) }
                    guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, at + "/tmp", AT_SYMLINK_FOLLOW) == 0 else {
                        throw TestFailure("linkat \(at)/tmp: errno \(errno)")
                    }
                    for name in ["file", "dir", "fifo", "tmp"] {
                        shown.append("\(directory)/\(name) " + (try modeText(at + "/" + name)))
                    }
                }
                return shown
            }
            XCTAssertEqual(mine, theirs, "\(options)")
            XCTAssertEqual(mine, ["acl/file -rw-rw-r--", "acl/dir drwxrwxr-x", "acl/fifo prw-rw-r--", "acl/tmp -rw-rw-r--",
                                  "setgid/file -rw-rw-r--", "setgid/dir drwxrwsr-x", "setgid/fifo prw-rw-r--",
                                  "setgid/tmp -rw-rw-r--"], "\(options)")
        }
    }

    /// The mode as coreutils' `stat -c %A` shows it: it asks (statx) for the mode alone, so it
    /// sees whatever the kernel kept of it.
    private func modeText(_ path: String) throws -> String {
        let shown = try Spawn.run("/usr/bin/stat", ["-c", "%A", path])
        guard shown.status == 0 else { throw TestFailure("stat \(path): \(shown.error)") }
        return shown.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
