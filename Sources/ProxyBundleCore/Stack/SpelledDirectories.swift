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
    /// merges in this layer (see `SpelledDirectories`), each opened by its path from the root;
    /// nil when the layer has no directory of that name, or names do not fold. `deepest`
    /// tells, then, how far `path` leads in the layer: the first real directory reached by
    /// its longest prefix, and the rest of `path`. Throws what keeps a directory from being
    /// opened other than its absence (EMFILE...): the layer must not seem to lack it.
    func spelledDirectories(_ path: LayerPath) throws(Errno) -> (found: SpelledDirectories?, deepest: LayerPath) {
        guard spellings != nil else { return (nil, path) }
        if path.isRoot { return (SpelledDirectories(paths: [.root], descriptors: [rootFD], rootFD: rootFD), .root) }
        let (paths, deepest) = try spelledPaths(path)
        var opened: [(path: LayerPath, fd: Int32)] = []
        do throws(Errno) {
            for real in paths {
                let fd = try absentAsNil { () throws(Errno) -> Int32 in try open(spelled: real, flags: pb_O_PATH | pb_O_DIRECTORY) }
                if let fd { opened.append((real, fd)) }
            }
        } catch {
            for real in opened { Sys.close(real.fd) }
            throw error
        }
        guard !opened.isEmpty else { return (nil, deepest) }
        return (SpelledDirectories(paths: opened.map(\.path), descriptors: opened.map(\.fd), rootFD: rootFD), opened[0].path)
    }

    /// The paths of the real directories that the directory `path` merges in this layer (see
    /// `spelledDirectories`), found in the tables of spellings: a directory on the way is
    /// opened only to read its table, or where a name has several spellings, to tell the
    /// directories among them. Empty when the layer has no directory of that name.
    func spelledPaths(_ path: LayerPath) throws(Errno) -> (found: [LayerPath], deepest: LayerPath) {
        guard let spellings else { return ([path], path) }
        var reals: [LayerPath] = [.root]
        let names = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        for (index, name) in names.enumerated() {
            var next: [(path: LayerPath, name: [UInt8], order: Int)] = []
            for real in reals {
                let all = try withDirectoryOpenedOnDemand(real) { open in spellings.spellings(of: name, in: real, open) }
                for spelled in all { next.append((real.appending(spelled), spelled, next.count)) }
            }
            if next.count > 1 {
                // of several spellings, only directories merge
                var directories: [(path: LayerPath, name: [UInt8], order: Int)] = []
                for candidate in next where try isDirectory(spelled: candidate.path) { directories.append(candidate) }
                next = directories
            }
            guard !next.isEmpty else { return ([], names[index...].reduce(reals[0]) { $0.appending($1) }) }
            next.sort { a, b in a.name == b.name ? a.order < b.order : a.name.lexicographicallyPrecedes(b.name) }
            reals = next.map(\.path)
        }
        return (reals, reals[0])
    }

    /// Runs `body` with a function that opens the real directory `path` (O_PATH) the first
    /// time it is called (-1 where the directory is absent), and closes it after. Throws what
    /// kept it from being opened other than its absence.
    func withDirectoryOpenedOnDemand<T>(_ path: LayerPath, _ body: (() -> Int32) -> T) throws(Errno) -> T {
        if path.isRoot { return body { self.rootFD } }
        var fd: Int32? = nil
        var failure: Errno? = nil
        defer { if let fd, fd >= 0 { Sys.close(fd) } }
        let result = body {
            if let fd { return fd }
            do throws(Errno) {
                fd = try absentAsNil { () throws(Errno) -> Int32 in try self.open(spelled: path, flags: pb_O_PATH | pb_O_DIRECTORY) } ?? -1
            } catch {
                failure = error
                fd = -1
            }
            return fd ?? -1
        }
        if let failure { throw failure }
        return result
    }

    /// Whether the real entry at `path` is a directory (not a symlink to one).
    private func isDirectory(spelled path: LayerPath) throws(Errno) -> Bool {
        let fd = try absentAsNil { () throws(Errno) -> Int32 in try open(spelled: path, flags: pb_O_PATH | pb_O_DIRECTORY) }
        if let fd { Sys.close(fd) }
        return fd != nil
    }

    /// The entries of the real directories `dirs` merged, where names fold: of the names of
    /// one key, the first spelling in byte order (in the first directory that has it), and
    /// every `.wh.` file, which hides names in the layers below only. Each directory's table
    /// of spellings is learnt on the way.
    func mergedEntries(of dirs: SpelledDirectories) throws(Errno) -> EntryList {
        var lists: [EntryList] = []
        // every directory's names in one table, numbered directory by directory
        var all = SpellingTable()
        var starts: [Int] = []
        var isWhiteoutFile: [Bool] = []
        for path in dirs.paths {
            let list = try absentAsNil { () throws(Errno) -> EntryList in try entries(spelled: path) } ?? EntryList()
            let table = SpellingTable(list)
            spellings?.learn(table, in: path)
            starts.append(all.count)
            for index in 0 ..< table.count { all.add(entry: index, of: table) }
            list.withNames { names in
                for entry in list.entries { isWhiteoutFile.append(!entry.isWhiteoutDevice && Whiteout.hasPrefix(names.name(entry))) }
            }
            lists.append(list)
        }
        var merged = EntryList()
        var whiteoutFiles = Set<[UInt8]>()
        for (number, list) in lists.enumerated() {
            list.withNames { names in
                for (index, entry) in list.entries.enumerated() {
                    let name = names.name(entry)
                    let global = starts[number] + index
                    if isWhiteoutFile[global] {
                        guard whiteoutFiles.insert(Array(name)).inserted else { continue }
                    } else {
                        guard global < all.count, all.firstEntry(keyOf: global, skipping: { isWhiteoutFile[$0] }) == global else { continue }
                    }
                    merged.append(name, type: entry.type, inode: entry.inode)
                    if entry.isWhiteoutDevice { merged.update(merged.entries.count - 1) { $0.isWhiteoutDevice = true } }
                }
            }
        }
        return merged
    }
}
