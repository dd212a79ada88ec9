#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// Packs a directory listing into a readdir or readdirplus reply buffer.
enum DirectoryPacker {
    /// The entries from `position` on that fit in `size` bytes, whether the listing was read
    /// to its end (this reply is empty: the reader asked past its last entry), and the nodes
    /// looked up. With a server, a readdirplus buffer: each entry given `attributes` is looked
    /// up (one more kernel reference, in `request`) only once it is known to fit.
    static func pack(_ req: fuse_req_t?, _ position: ListingStore.Position, size: Int, server: FuseServer?,
                     _ request: Request, attributes: ListingReaders.Attributes = .all)
        -> (bytes: [UInt8], ends: Bool, lookedUp: [NodeID]) {
        let listing = position.listing
        var buffer = [UInt8](repeating: 0, count: size)
        var used = 0
        var index = min(max(0, position.index), listing.items.count)
        var samples = Samples(taking: attributes == .allButSamples)
        var lookedUp: [NodeID] = []
        buffer.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: CChar.self) else { return }
            listing.list.withNames { names in
                for item in listing.items[index...] {
                    let next = position.offset(after: index)
                    let name = names.cString(item)
                    let added: Int?
                    if let server {
                        let withAttributes = attributes != .none && !samples.take(item, names.name(item))
                        added = addPlus(req, item, name, base + used, size - used, next, listing,
                                        withAttributes ? server : nil, request, &lookedUp)
                    } else {
                        var st = stat()
                        st.st_ino = ino_t(item.inode)
                        st.st_mode = mode_t(item.type) << 12
                        let needed = fuse_add_direntry(req, base + used, size - used, name, &st, next)
                        added = needed <= size - used ? needed : nil
                    }
                    guard let added else { break }
                    used += added
                    index += 1
                }
            }
        }
        buffer.removeSubrange(used...)
        return (buffer, position.index >= listing.items.count, lookedUp)
    }

    /// The entries left without attributes in a first batch: one directory, one other entry.
    private struct Samples {
        var directoryTaken: Bool
        var otherTaken: Bool

        init(taking: Bool) {
            directoryTaken = !taking
            otherTaken = !taking
        }

        /// Whether `item` is a sample (and so goes without attributes).
        mutating func take(_ item: DirectoryListing.Item, _ name: UnsafeRawBufferPointer) -> Bool {
            if directoryTaken && otherTaken || EntryList.isDotOrDotDot(name) { return false }
            if item.type == UInt8(DT_DIR) {
                defer { directoryTaken = true }
                return !directoryTaken
            }
            defer { otherTaken = true }
            return !otherTaken
        }
    }

    /// Adds one readdirplus entry; nil when it does not fit. With a server, the entry carries
    /// its attributes, and one that vanished since the listing was taken is skipped (0 bytes);
    /// without, node 0 tells the kernel to keep just the name and type. A node looked up is
    /// added to `lookedUp`.
    private static func addPlus(_ req: fuse_req_t?, _ item: DirectoryListing.Item, _ name: UnsafePointer<CChar>,
                                _ buffer: UnsafeMutablePointer<CChar>, _ room: Int, _ next: off_t,
                                _ listing: DirectoryListing, _ server: FuseServer?, _ request: Request,
                                _ lookedUp: inout [NodeID]) -> Int? {
        var entry = fuse_entry_param()
        var found: Overlay.Entry?
        if let server, !EntryList.isDotOrDotDot(UnsafeRawBufferPointer(start: name, count: Int(item.length))) {
            // looked up (a kernel reference) only once the entry is known to fit
            if plusSize(nameLength: Int(item.length)) > room { return nil }
            guard let entry = try? server.overlay.lookup(request, listed: item, in: listing) else { return 0 }
            found = entry
        }
        if let found, let server {
            entry = server.entryParameters(found, request)
        } else {
            // no lookup: the kernel counts no references for these
            entry.attr.st_ino = ino_t(item.inode)
            entry.attr.st_mode = mode_t(item.type) << 12
        }
        let needed = fuse_add_direntry_plus(req, buffer, room, name, &entry, next)
        if needed <= room {
            if let found { lookedUp.append(found.node) }
            return needed
        }
        if let found, let server { server.overlay.forget(found.node, count: 1) }
        return nil
    }

    /// The bytes a readdirplus entry takes: a `fuse_entry_out` (128), the dirent's header (24)
    /// and the name, padded to 8.
    private static func plusSize(nameLength: Int) -> Int {
        (128 + 24 + nameLength + 7) & ~7
    }
}
