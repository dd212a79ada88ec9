#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The real directories of one layer that one directory of a folding mount merges there: each
/// directory of the name's key, on every path of spellings that leads to it (`Data/Sounds`,
/// `data/sounds` and `data/SOUNDS`), open O_PATH (each closed with the value, the root's
/// excepted). In the order their entries take precedence: by the spelling of the last name in
/// byte order, then in the order of their parents (see `FoldedMerge`). The first is where the
/// directory itself is, for the layer.
public final class SpelledDirectories: Sendable {
    public let paths: [LayerPath]
    let descriptors: [Int32]
    private let rootFD: Int32

    init(paths: [LayerPath], descriptors: [Int32], rootFD: Int32) {
        self.paths = paths
        self.descriptors = descriptors
        self.rootFD = rootFD
    }

    deinit {
        for fd in descriptors where fd != rootFD { Sys.close(fd) }
    }
}

extension Layer {
    /// Where names fold, the real directories that the directory `path` (the view's spelling)
    /// merges in this layer (see `SpelledDirectories`); nil when the layer has no directory of
    /// that name, or names do not fold. `deepest` tells, then, how far `path` leads in the
    /// layer: the first real directory reached by its longest prefix, and the rest of `path`.
    /// Throws what keeps a directory from being opened other than its absence (EMFILE...):
    /// the layer must not seem to lack it.
    func spelledDirectories(_ path: LayerPath) throws(Errno) -> (found: SpelledDirectories?, deepest: LayerPath) {
        guard let spellings else { return (nil, path) }
        var reals: [(path: LayerPath, fd: Int32)] = [(.root, rootFD)]
        var next: [(path: LayerPath, fd: Int32, name: [UInt8], order: Int)] = []
        defer {
            for real in reals where real.fd != rootFD { Sys.close(real.fd) }
            for real in next { Sys.close(real.fd) }
        }
        let names = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        for (index, name) in names.enumerated() {
            for real in reals {
                for spelled in spellings.spellings(of: name, in: real.path, { real.fd }) {
                    let fd = try absentAsNil { () throws(Errno) -> Int32 in
                        try spelled.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                            try Sys.openat2(real.fd, p, flags: pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                            resolve: Layer.resolve)
                        }
                    }
                    if let fd { next.append((real.path.appending(spelled), fd, spelled, next.count)) }
                }
            }
            guard !next.isEmpty else {
                return (nil, names[index...].reduce(reals[0].path) { $0.appending($1) })
            }
            for real in reals where real.fd != rootFD { Sys.close(real.fd) }
            next.sort { a, b in a.name == b.name ? a.order < b.order : a.name.lexicographicallyPrecedes(b.name) }
            reals = next.map { ($0.path, $0.fd) }
            next = []
        }
        let found = SpelledDirectories(paths: reals.map(\.path), descriptors: reals.map(\.fd), rootFD: rootFD)
        reals = []  // the value owns them now
        return (found, found.paths[0])
    }

    /// The entries of the real directories `dirs` merged, where names fold: of the names of
    /// one key, the first spelling in byte order (in the first directory that has it), and
    /// every `.wh.` file, which hides names in the layers below only. Each directory's table
    /// of spellings is learnt on the way.
    func mergedEntries(of dirs: SpelledDirectories) throws(Errno) -> EntryList {
        var lists: [EntryList] = []
        var keys: [[FoldedName]] = []
        for path in dirs.paths {
            let list = try absentAsNil { () throws(Errno) -> EntryList in try entries(spelled: path) } ?? EntryList()
            keys.append(Overlay.foldedKeys(list))
            spellings?.learn(list, keys: keys[keys.count - 1], in: path)
            lists.append(list)
        }
        var serving: [FoldedName: (list: Int, index: Int, name: [UInt8])] = [:]
        for (number, list) in lists.enumerated() {
            list.withNames { names in
                for (index, entry) in list.entries.enumerated() {
                    let name = names.name(entry)
                    if !entry.isWhiteoutDevice && Whiteout.hasPrefix(name) { continue }
                    let key = keys[number][index]
                    if let known = serving[key], !name.lexicographicallyPrecedes(known.name) { continue }
                    serving[key] = (number, index, Array(name))
                }
            }
        }
        var merged = EntryList()
        var whiteoutFiles = Set<[UInt8]>()
        for (number, list) in lists.enumerated() {
            list.withNames { names in
                for (index, entry) in list.entries.enumerated() {
                    let name = names.name(entry)
                    if !entry.isWhiteoutDevice && Whiteout.hasPrefix(name) {
                        guard whiteoutFiles.insert(Array(name)).inserted else { continue }
                    } else {
                        guard let first = serving[keys[number][index]], first.list == number, first.index == index else { continue }
                    }
                    merged.append(name, type: entry.type, inode: entry.inode)
                    if entry.isWhiteoutDevice { merged.update(merged.entries.count - 1) { $0.isWhiteoutDevice = true } }
                }
            }
        }
        return merged
    }
}
