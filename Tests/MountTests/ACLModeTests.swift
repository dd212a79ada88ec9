import CSyscalls
import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// How ACLs and the mode bits meet, without `-o acl` (the default) as with it, compared with
/// kernel overlayfs: what xfstests generic/375 checks.
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

    /// The mode as coreutils' `stat -c %A` shows it: it asks (statx) for the mode alone, so it
    /// sees whatever the kernel kept of it.
    private func modeText(_ path: String) throws -> String {
        let shown = try Spawn.run("/usr/bin/stat", ["-c", "%A", path])
        guard shown.status == 0 else { throw TestFailure("stat \(path): \(shown.error)") }
        return shown.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
