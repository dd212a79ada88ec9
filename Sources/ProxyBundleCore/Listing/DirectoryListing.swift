#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// A merged directory listing, taken once when the directory is opened so that offsets stay
/// valid across readdir calls (telldir/seekdir). Entry `i` has offset `i + 1`.
///
/// `Overlay.listDirectory` takes it from what `Lister` merges.
public final class DirectoryListing: Sendable {
    public typealias Item = EntryList.Entry

    public let node: NodeID
    public let list: EntryList
    /// The directory as it was listed, and the node table's version then: while no name
    /// changed, an item's layer tells where its entry is (see `Overlay.lookup(listed:in:)`).
    let directories: DirectoryDescriptors
    let version: UInt64

    init(node: NodeID, list: EntryList, directories: DirectoryDescriptors, version: UInt64) {
        self.node = node
        self.list = list
        self.directories = directories
        self.version = version
    }

    public var items: [Item] { list.entries }

    /// The name of `item`, copied.
    public func name(_ item: Item) -> [UInt8] { list.name(item) }

    /// The entries with their names, copied (for tests and tools, not the hot paths).
    public var named: [(name: [UInt8], item: Item)] { items.map { (name($0), $0) } }
}

extension DirectoryListing {
    /// What `readAhead` did with an entry.
    public enum ReadAhead {
        /// Its first `limit` bytes are on their way into the page cache.
        case started
        /// Some of them were in the page cache already: nothing asked.
        case cached
        /// Not a regular file, or it could not be opened.
        case skipped
    }

    /// Starts reading the first `limit` bytes of `item` into the page cache unless
    /// some already are, and returns without waiting for the disk. Only an item listed as a
    /// regular file is opened, relative to the directory descriptors the listing was taken from
    /// (a hint for the page cache, so it may follow a directory moved since), without following
    /// a symlink, without waiting for a FIFO's writer and without changing an access time where
    /// the daemon may avoid it; nothing is read into the daemon.
    public func readAhead(_ item: Item, limit: Int) -> ReadAhead {
        let dirs = directories
        let layer = Int(item.layer)
        guard item.type == UInt8(DT_REG), dirs.has(layer) else { return .skipped }
        let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | pb_O_NOFOLLOW | pb_O_CLOEXEC
        let entryName = name(item)
        let opened = try? Layer.open(flags: flags, preservingAccessTime: true) { (flags: Int32) throws(Errno) -> Int32 in
            try dirs.open(entryName, in: layer, flags: flags)
        }
        guard let fd = opened else { return .skipped }
        defer { Sys.close(fd) }
        if pb_cached_pages(fd, UInt64(limit)) > 0 { return .cached }
        // fails on anything but a regular file (one replaced since it was listed)
        return posix_fadvise(fd, 0, off_t(limit), POSIX_FADV_WILLNEED) == 0 ? .started : .skipped
    }
}
