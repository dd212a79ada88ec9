#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// The files of one directory in listing order, and how far reading them ahead has got: the
/// read-ahead thread's own state (see `Prefetcher.noteOpen`).
final class FileOrder {
    let parent: NodeID
    let entries: EntryList
    /// The directory in each layer (O_PATH, -1 where a layer has none).
    let directories: (upper: Int32, lower: Int32)
    /// Where the last name was found: a program reading in order finds the next one just after.
    private var cursor = 0
    /// The entries up to this index have been read ahead.
    var readThrough = -1
    /// How many files in a row were found in the page cache already.
    var cachedInARow = 0

    init?(of parent: NodeID, in overlay: Overlay) {
        guard let listed = overlay.entriesInListingOrder(of: parent) else { return nil }
        self.parent = parent
        entries = listed.entries
        directories = overlay.layerDirectories(listed.path)
    }

    deinit {
        if directories.upper >= 0 { close(directories.upper) }
        if directories.lower >= 0 { close(directories.lower) }
    }

    /// Whether every file after the last one found has been read ahead (or needs not be).
    var isDone: Bool { readThrough >= entries.entries.count - 1 }

    /// The index of `name`, looked for from the last one found on.
    func index(of name: [UInt8]) -> Int? {
        let all = entries.entries
        let found = entries.withNames { names -> Int? in
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
