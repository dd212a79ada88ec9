import CFuse3

/// What the daemon asks of the kernel at INIT. libfuse 3.14 fails the mount if `want` holds a
/// bit the kernel did not offer, so only offered bits are ever requested.
enum Capabilities {
    static let wanted: UInt32 = UInt32(FUSE_CAP_ASYNC_READ) | UInt32(FUSE_CAP_SPLICE_WRITE)
        | UInt32(FUSE_CAP_SPLICE_MOVE) | UInt32(FUSE_CAP_READDIRPLUS)
        | UInt32(FUSE_CAP_PARALLEL_DIROPS)
        | UInt32(FUSE_CAP_AUTO_INVAL_DATA) | UInt32(FUSE_CAP_CACHE_SYMLINKS) | exportSupport
        | leavesUmask

    /// The kernel leaves the umask to the daemon (`Overlay.masked`), which applies it unless
    /// the directory has a default ACL, which applies instead, as on the layer's own file
    /// system; else a default ACL's bits were cut by the umask first (generic/389, 697). With
    /// or without `-o acl`.
    static let leavesUmask = UInt32(FUSE_CAP_DONT_MASK)

    /// File handles that outlive the kernel's cache: without it, the kernel answers ESTALE for
    /// a handle whose inode it evicted; with it, it looks up "." in the handle's node ID (and
    /// ".." to connect a directory), which the daemon answers (`Overlay.lookupItself`).
    static let exportSupport = UInt32(FUSE_CAP_EXPORT_SUPPORT)

    /// Asked for by libfuse's defaults but not wanted: with READDIRPLUS_AUTO the kernel asks
    /// for attributes only with a directory's first batch of entries, and then looks up every
    /// further entry one request at a time when `find`, `ls -l`, `rsync` or `git` stat them.
    static let unwanted: UInt32 = UInt32(FUSE_CAP_READDIRPLUS_AUTO)

    /// POSIX ACLs (`-o acl`): the kernel reads a file's ACL (kept until it next refreshes the
    /// file's attributes) and enforces it, as kernel overlayfs and the layers' own file system
    /// do; without it, `default_permissions` checks the mode bits alone, refusing what a named
    /// entry grants.
    static let acl: UInt32 = UInt32(FUSE_CAP_POSIX_ACL)

    /// Sets what the daemon wants; returns whether the kernel enforces POSIX ACLs.
    static func negotiate(_ connection: UnsafeMutablePointer<fuse_conn_info>, acl usesACL: Bool) -> Bool {
        let capable = connection.pointee.capable
        let wanted = usesACL ? wanted | acl : wanted
        connection.pointee.want = (connection.pointee.want | (wanted & capable)) & capable & ~unwanted
        return connection.pointee.want & UInt32(FUSE_CAP_POSIX_ACL) != 0
    }
}
