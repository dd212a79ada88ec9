#if canImport(Glibc)
import Glibc
#endif

/// The user on whose behalf a request is made.
public struct Requester: Sendable {
    public var uid: uid_t
    public var gid: gid_t
    public var groups: [gid_t]
    /// The requester's umask, for what it creates (see `Overlay.create`).
    public var umask: mode_t

    public init(uid: uid_t, gid: gid_t, groups: [gid_t], umask: mode_t = 0) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.umask = umask
    }
}

/// The classic owner/group/other permission check, as the kernel's default_permissions does.
enum Permissions {
    static func check(_ st: stat, mask: Int32, user: Requester) throws(Errno) {
        if mask == F_OK { return }
        let mode = UInt32(st.st_mode)
        if user.uid == 0 {
            // root may read and write anything; execute needs some x bit unless a directory
            let anyExecute = mode & UInt32(S_IXUSR | S_IXGRP | S_IXOTH) != 0
            if mask & X_OK != 0 && !anyExecute && (mode & UInt32(S_IFMT)) != UInt32(S_IFDIR) {
                throw Errno.accessDenied
            }
            return
        }
        let granted: UInt32
        if st.st_uid == user.uid {
            granted = (mode >> 6) & 7
        } else if st.st_gid == user.gid || user.groups.contains(st.st_gid) {
            granted = (mode >> 3) & 7
        } else {
            granted = mode & 7
        }
        if UInt32(mask) & 7 & ~granted != 0 { throw Errno.accessDenied }
    }
}
