#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// The files of one directory in listing order, and how far reading them ahead has got: the
/// read-ahead thread's own state (see `Prefetcher.noteOpen`). A program may also open them
/// in the order of their names (a sorted list of paths, as an app that loads its resources
/// by name may): the regular files sorted by name, and how far that order was read ahead.
final class FileOrder {
    /// The orders a program is seen to open a directory's files in.
    enum Order {
        /// The listing's (`cat *`, `find`, `tar`).
        case listing
        /// Their names' bytes (a sorted list of paths).
        case names
        /// Neither: nothing is read ahead.
        case unknown
    }

    /// The directory's listing, which also keeps the descriptors it was taken from.
    let listing: DirectoryListing
    /// Where the last name was found: a program reading in order finds the next one just after.
    private var cursor = 0
    /// The entries up to this index have been read ahead.
    var readThrough = -1
    /// The regular files' indices sorted by name, made when first needed.
    private var byName: [(name: [UInt8], index: Int)]?
    /// The files up to this place in name order have been read ahead.
    var readThroughByName = -1

    init?(of parent: NodeID, in overlay: Overlay, _ request: Request) {
        guard let listing = try? overlay.listDirectory(request, parent) else { return nil }
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

    /// The regular files in name order (byte order), as (name, listing index).
    var filesByName: [(name: [UInt8], index: Int)] {
        if let byName { return byName }
        let sorted = items.indices.filter { items[$0].type == UInt8(DT_REG) }
            .map { (name: listing.name(items[$0]), index: $0) }
            .sorted { $0.name.lexicographicallyPrecedes($1.name) }
        byName = sorted
        return sorted
    }

    /// The place of the file at listing index `index` in name order, or nil.
    func placeByName(of index: Int) -> Int? {
        let files = filesByName
        let name = listing.name(items[index])
        var low = 0, high = files.count
        while low < high {
            let middle = (low + high) / 2
            if files[middle].name.lexicographicallyPrecedes(name) { low = middle + 1 } else { high = middle }
        }
        return low < files.count && files[low].index == index ? low : nil
    }

    /// The order in which a program that opened the file at listing index `previous`, then the
    /// one at `index`, opens this directory's files.
    func order(from previous: Int, to index: Int) -> Order {
        if let next = items[(previous + 1)...].firstIndex(where: { $0.type == UInt8(DT_REG) }), next == index {
            return .listing
        }
        if let from = placeByName(of: previous), let to = placeByName(of: index), to == from + 1 { return .names }
        return .unknown
    }
}
