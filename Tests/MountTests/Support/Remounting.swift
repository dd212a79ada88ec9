import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The built binary installed as /usr/local/bin/proxybundle for mount.fuse3 to run as the
/// helper of `fuse.proxybundle` (mount(8) runs helpers with a fixed PATH, so it must be
/// there). Where that path is free, a symlink to the built binary is made and removed; where
/// another installation is there, the built binary is bind-mounted over it for the test's
/// duration (the installation is never modified, and a bind mount left by a crashed test is
/// gone at the next boot).
struct HelperInstall {
    static let path = "/usr/local/bin/proxybundle"
    private let bound: Bool

    init() throws {
        let installed = HelperInstall.path
        try FileManager.default.createDirectory(atPath: "/usr/local/bin", withIntermediateDirectories: true)
        let ours = (try? FileManager.default.destinationOfSymbolicLink(atPath: installed)) == MountFixture.binary
        bound = Disk.lstatError(installed) == 0 && !ours
        if bound {
            guard mount(MountFixture.binary, installed, nil, UInt(MS_BIND), nil) == 0 else {
                throw TestFailure("bind \(MountFixture.binary) onto \(installed): errno \(errno)")
            }
        } else {
            _ = unlink(installed)
            guard symlink(MountFixture.binary, installed) == 0 else { throw TestFailure("symlink \(installed): errno \(errno)") }
        }
    }

    func remove() {
        if bound { _ = umount2(HelperInstall.path, Int32(MNT_DETACH)) } else { unlink(HelperInstall.path) }
    }
}

extension Probe {
    /// Each kind of change tried once in `root` (which holds a file `file`, a file `own` and
    /// an empty directory `d`): the errno it failed with, or 0.
    static func changes(in root: String) -> [String: Int32] {
        func result(_ value: Int32) -> Int32 { value < 0 ? errno : 0 }
        let file = root + "/file"
        var results: [String: Int32] = [:]
        let created = open(root + "/created", O_CREAT | O_WRONLY, 0o644)
        results["create"] = result(created)
        if created >= 0 { close(created) }
        let opened = open(file, O_WRONLY)
        results["open for writing"] = result(opened)
        if opened >= 0 { close(opened) }
        results["truncate"] = result(truncate(file, 0))
        results["mkdir"] = result(mkdir(root + "/made", 0o755))
        results["rmdir"] = result(rmdir(root + "/d"))
        results["rename"] = result(rename(file, root + "/renamed"))
        results["chmod"] = result(chmod(file, 0o600))
        results["chown"] = result(chown(file, 1, 1))
        results["utimes"] = result(utimensat(AT_FDCWD, root + "/own", nil, 0))
        results["setxattr"] = result(setxattr(file, "user.test", "1", 1, 0))
        results["removexattr"] = result(removexattr(file, "user.test"))
        results["symlink"] = result(symlink("file", root + "/link"))
        results["link"] = result(link(root + "/own", root + "/hard"))
        results["mkfifo"] = result(mkfifo(root + "/fifo", 0o644))
        results["unlink"] = result(unlink(root + "/own"))
        results["unlink missing"] = result(unlink(root + "/missing"))
        return results
    }

    /// Writes `text` to `path` in one write: 0, or the errno of the open or the write.
    static func writeError(_ text: String, to path: String) -> Int32 {
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return write(fd, text, text.utf8.count) == text.utf8.count ? 0 : errno
    }
}
