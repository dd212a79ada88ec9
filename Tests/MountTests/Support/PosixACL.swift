import CSyscalls
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// POSIX ACLs in the kernel's extended attribute form: version 2, then each entry's tag,
/// permissions and id, little-endian.
enum PosixACL {
    static let userObj: UInt16 = 0x01, namedUser: UInt16 = 0x02, groupObj: UInt16 = 0x04
    static let mask: UInt16 = 0x10, other: UInt16 = 0x20, any: UInt32 = 0xFFFF_FFFF

    static func value(_ entries: [(UInt16, UInt16, UInt32)]) -> [UInt8] {
        var bytes: [UInt8] = [2, 0, 0, 0]
        for (tag, permissions, id) in entries {
            bytes += [UInt8(tag & 0xFF), UInt8(tag >> 8), UInt8(permissions), 0]
            bytes += (0..<4).map { UInt8(truncatingIfNeeded: id >> (8 * $0)) }
        }
        return bytes
    }

    static func set(_ path: String, _ name: String, _ entries: [(UInt16, UInt16, UInt32)]) throws {
        let bytes = value(entries)
        guard bytes.withUnsafeBytes({ lsetxattr(path, name, $0.baseAddress, $0.count, 0) }) == 0 else {
            throw TestFailure("setxattr \(name) on \(path): errno \(errno)")
        }
    }

    /// The minimal ACL `u::U,g::G,o::O` (permissions as octal digits).
    static func minimal(_ user: UInt16, _ group: UInt16, _ other: UInt16) -> [(UInt16, UInt16, UInt32)] {
        [(userObj, user, any), (groupObj, group, any), (PosixACL.other, other, any)]
    }

    /// Sets `entries` as `path`'s access ACL as user `uid` in group `gid` alone (setfattr run
    /// through setpriv); "" or what it printed on failure.
    static func set(_ path: String, _ entries: [(UInt16, UInt16, UInt32)], as uid: UInt32, gid: UInt32) throws -> String {
        let encoded = "0s" + Data(value(entries)).base64EncodedString()
        let result = try Spawn.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups",
                                                       "/usr/bin/setfattr", "-n", "system.posix_acl_access", "-v", encoded, path],
                                   seconds: 20)
        return result.status == 0 ? "" : result.error.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
