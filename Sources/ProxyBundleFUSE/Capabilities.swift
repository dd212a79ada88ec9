import CFuse3

/// What the daemon asks of the kernel at INIT. libfuse 3.14 fails the mount if `want` holds a
/// bit the kernel did not offer, so only offered bits are ever requested.
enum Capabilities {
    static let wanted: UInt32 = UInt32(FUSE_CAP_ASYNC_READ) | UInt32(FUSE_CAP_SPLICE_WRITE)
        | UInt32(FUSE_CAP_SPLICE_MOVE) | UInt32(FUSE_CAP_READDIRPLUS)
        | UInt32(FUSE_CAP_PARALLEL_DIROPS)
        | UInt32(FUSE_CAP_AUTO_INVAL_DATA) | UInt32(FUSE_CAP_CACHE_SYMLINKS)

    /// Asked for by libfuse's defaults but not wanted: with READDIRPLUS_AUTO the kernel asks
    /// for attributes only with a directory's first batch of entries, and then looks up every
    /// further entry one request at a time when `find`, `ls -l`, `rsync` or `git` stat them.
    static let unwanted: UInt32 = UInt32(FUSE_CAP_READDIRPLUS_AUTO)

    static func negotiate(_ connection: UnsafeMutablePointer<fuse_conn_info>) {
        let capable = connection.pointee.capable
        connection.pointee.want = (connection.pointee.want | (wanted & capable)) & capable & ~unwanted
    }
}
