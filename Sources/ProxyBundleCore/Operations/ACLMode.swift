#if canImport(Glibc)
import Glibc
#endif

/// The mode a mount that checks permission bits alone (without `-o acl`) shows for an entry
/// with an access ACL, so that it never grants more than the layer's own file system: the
/// kernel then gives the owning group the group bits (the ACL's mask, on the layer) and every
/// named user or group the group or other bits, where the layer gives them their own entry.
extension Overlay {
    /// `mode` with its group bits cut to the owning group's entry and both group and other bits
    /// cut to what every named user and group entry grants (each within the mask); unchanged
    /// for a minimal ACL (no mask: the mode says it all) or a value that is not an ACL.
    public static func modeWithinACL(_ mode: mode_t, acl: [UInt8]) -> mode_t {
        guard acl.count >= 4, (acl.count - 4) % 8 == 0, acl[0] == 2 else { return mode }
        var owningGroup: mode_t = 7, mask: mode_t? = nil, named: mode_t = 7
        var index = 4
        while index < acl.count {
            let tag = UInt16(acl[index]) | UInt16(acl[index + 1]) << 8
            let permissions = mode_t(acl[index + 2] & 7)
            switch tag {
            case 0x04: owningGroup = permissions
            case 0x10: mask = permissions
            case 0x02, 0x08: named &= permissions
            default: break
            }
            index += 8
        }
        guard let mask else { return mode }
        let allowed = named & mask
        let group = (mode >> 3) & owningGroup & allowed, other = mode & allowed
        return mode & ~0o077 | group << 3 | other
    }

    /// The access ACL of `node` as its layer holds it; empty where it has none (or it cannot be
    /// read: the mode then stands as it is).
    public func accessACL(_ request: Request, of node: NodeID) -> [UInt8] {
        (try? extendedAttribute(request, node, name: Self.accessACL)) ?? []
    }
}
