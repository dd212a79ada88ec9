#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// The files of one directory in listing order, and how far reading them ahead has got: the
/// read-ahead thread's own state (see `Prefetcher.noteOpen`).
final class FileOrder {
    /// The directory's listing, which also keeps the descriptors it was taken from.
    let listing: DirectoryListing
    /// Where the last name was found: a program reading in order finds the next one just after.
    private var cursor = 0
    /// The entries up to this index have been read ahead.
    var readThrough = -1
    /// How many files in a row were found in the page cache already.
    var cachedInARow = 0

    init?(of parent: NodeID, in overlay: Overlay) {
        guard let listing = try? overlay.listDirectory(parent) else { return nil }
        self.listing = listing
    }

    var parent: NodeID { listing.node }
    var items: [DirectoryListing.Item] { listing.items }

    /// Whether every file after the last one found has been read ahead (or needs not be).
    var isDone: Bool { readThrough >= items.count - 1 }

    /// The index of `name`, looked for from the last one found on.
    func index(of name: [UInt8]) -> Int? {
        let all = items
        let found = listing.list.withNames { names -> Int? in
            name.withUnsafeBytes { wanted -> Int? in
                guard let wantedBytes = wanted.baseAddress else { return nil }
                func matches(_ index: Int) -> Bool {
                    let entry = all[index]
                    return Int(entry.length) == wanted.count
                        && memcmp(names.cString(entry), wantedBytes, wanted.count) == 0
                }
                return (cursor ..< all.count).first(where: matches) ?? (0 ..< min(cursor, all.count)).first(where: matches)
            }
        }
        if let found { cursor = found + 1 }
        return found
    }
}
