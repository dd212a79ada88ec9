import ProxyBundleCore

/// What opendir hands the kernel: the directory's listing is taken on the first readdir, not
/// at opendir, so an open whose listing the kernel already caches (cached readdir) costs no
/// listing of the layers. Once taken, the listing stays for the life of the handle, so
/// offsets stay valid (telldir/seekdir).
final class DirectoryHandle: Sendable {
    let node: NodeID
    private let taken = Locked<DirectoryListing?>(nil)

    init(node: NodeID) {
        self.node = node
    }

    func listing(_ overlay: Overlay) throws(Errno) -> DirectoryListing {
        try taken.withLock { (listing: inout DirectoryListing?) throws(Errno) -> DirectoryListing in
            if let listing { return listing }
            let made = try overlay.listDirectory(node)
            listing = made
            return made
        }
    }
}
