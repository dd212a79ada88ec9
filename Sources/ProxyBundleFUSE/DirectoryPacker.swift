#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import ProxyBundleCore

/// Packs a directory listing into a readdir or readdirplus reply buffer.
enum DirectoryPacker {
    /// Entries from `offset` on that fit in `size` bytes. With a server, a readdirplus buffer:
    /// each entry given `attributes` is looked up (one more kernel reference) only once it is
    /// known to fit.
    static func pack(_ req: fuse_req_t?, _ listing: DirectoryListing, size: Int, offset: off_t,
                     server: FuseServer?, attributes: ListingReaders.Attributes = .all) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: size)
        var used = 0
        var index = max(0, Int(offset))
        var samples = Samples(taken: attributes == .allButSamples ? [] : [.directory, .other])
        buffer.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: CChar.self) else { return }
            while index < listing.items.count {
                let item = listing.items[index]
                let next = off_t(index + 1)
                let added = item.name.withCStringCopy { name -> Int? in
                    if let server {
                        let withAttributes = attributes != .none && !samples.take(item)
                        return addPlus(req, item, name, base + used, size - used, next, listing,
                                       withAttributes ? server : nil)
                    }
                    var st = stat()
                    st.st_ino = ino_t(item.inode)
                    st.st_mode = mode_t(item.type) << 12
                    let needed = fuse_add_direntry(req, base + used, size - used, name, &st, next)
                    return needed <= size - used ? needed : nil
                }
                guard let added else { break }
                used += added
                index += 1
            }
        }
        buffer.removeSubrange(used...)
        return buffer
    }

    /// The entries left without attributes in a first batch, one of each kind.
    private struct Samples {
        enum Kind { case directory, other }
        var taken: Set<Kind>

        /// Whether `item` is a sample (and so goes without attributes).
        mutating func take(_ item: DirectoryListing.Item) -> Bool {
            if taken.count == 2 || DirectoryListing.isDotOrDotDot(item.name) { return false }
            return taken.insert(item.type == UInt8(DT_DIR) ? .directory : .other).inserted
        }
    }

    /// Adds one readdirplus entry; nil when it does not fit. With a server, the entry carries
    /// its attributes, and one that vanished since the listing was taken is skipped (0 bytes);
    /// without, node 0 tells the kernel to keep just the name and type.
    private static func addPlus(_ req: fuse_req_t?, _ item: DirectoryListing.Item, _ name: UnsafePointer<CChar>,
                                _ buffer: UnsafeMutablePointer<CChar>, _ room: Int, _ next: off_t,
                                _ listing: DirectoryListing, _ server: FuseServer?) -> Int? {
        let needed = fuse_add_direntry_plus(req, nil, 0, name, nil, next)
        if needed > room { return nil }
        var entry = fuse_entry_param()
        if DirectoryListing.isDotOrDotDot(item.name) || server == nil {
            // no lookup: the kernel counts no references for these
            entry.attr.st_ino = ino_t(item.inode)
            entry.attr.st_mode = mode_t(item.type) << 12
        } else {
            guard let server, let found = try? server.overlay.lookup(listed: item, in: listing) else { return 0 }
            entry = server.entryParameters(found)
        }
        return fuse_add_direntry_plus(req, buffer, room, name, &entry, next)
    }
}
