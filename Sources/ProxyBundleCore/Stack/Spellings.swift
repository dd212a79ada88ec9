#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// How one layer spells its names, for a mount that folds them (`-o casefold`, see
/// `CaseFold`): the rest of the daemon names an entry as the kernel asked for it, in any case,
/// and the layer answers with its own spelling of each name, so that `Data/Rock.DDS` opens
/// `data/rock.dds` where that is what the layer holds. Of two spellings of one name in one
/// directory, the first in byte order serves (see `FoldedMerge`).
///
/// A directory is read once, into a `SpellingTable` (its names in one buffer, found by key),
/// kept until an invalidation (like every cached answer); the substitution's tables are
/// forgotten at every change made through the mount too (see `NodeTable.forgetOtherSpellings`).
public final class Spellings: Sendable {
    private struct State {
        var tables: [LayerPath: SpellingTable] = [:]
        /// Bumped when the tables are forgotten: a table read before is not kept.
        var generation: UInt64 = 0
    }
    private let state = Locked(State(), rank: .spellings)
    /// Directories whose tables are kept before all are dropped: about 32 MB of names at most
    /// for directories of a thousand names.
    static let limit = 4096

    init() {}

    /// The table of the real directory `dir` (as the layer spells it), read through `open()`
    /// (an O_PATH descriptor the caller keeps, or -1) unless kept; nil when it cannot be read.
    private func table(_ dir: LayerPath, _ open: () -> Int32) -> SpellingTable? {
        let (known, generation) = state.withLock { ($0.tables[dir], $0.generation) }
        if let known { return known }
        let fd = open()
        guard fd >= 0, let table = Spellings.table(of: fd) else { return nil }
        keep(table, for: dir, readIn: generation)
        return table
    }

    /// The first spelling in byte order of `name` in the real directory `dir` (as the layer
    /// spells it), open as `open()` gives it; nil when the directory holds no spelling of it.
    func spelling(of name: [UInt8], in dir: LayerPath, _ open: () -> Int32) -> [UInt8]? {
        table(dir, open)?.first(of: name)
    }

    /// Every spelling of `name` in the real directory `dir`, in byte order.
    func spellings(of name: [UInt8], in dir: LayerPath, _ open: () -> Int32) -> [[UInt8]] {
        table(dir, open)?.all(of: name) ?? []
    }

    /// Keeps `table` as `dir`'s, unless the tables were forgotten since it was read.
    private func keep(_ table: SpellingTable, for dir: LayerPath, readIn generation: UInt64) {
        state.withLock { s in
            guard s.generation == generation else { return }
            if s.tables.count >= Spellings.limit { s.tables.removeAll(keepingCapacity: true) }
            s.tables[dir] = table
        }
    }

    /// Keeps `table`, made from the entries of the real directory `dir` read for a listing,
    /// as that directory's: its lookups then need not read the directory again.
    func learn(_ table: SpellingTable, in dir: LayerPath) {
        let (known, generation) = state.withLock { ($0.tables[dir] != nil, $0.generation) }
        guard !known else { return }
        keep(table.compacted(), for: dir, readIn: generation)
    }

    /// Forgets every table read: the layer may have changed.
    func forget() {
        state.withLock { s in
            s.tables.removeAll()
            s.generation &+= 1
        }
    }

    /// The table of the directory open as `fd`; nil when it cannot be read.
    static func table(of fd: Int32) -> SpellingTable? {
        let dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return nil }
        defer { Sys.close(dir) }
        var table = SpellingTable()
        let read: Void? = try? readDirectory(dir) { entry in table.add(entry.bytes) }
        return read == nil ? nil : table.compacted()
    }
}

extension Layer {
    /// `path` as this layer spells it, for a mount that folds names: the entry that serves it
    /// (see `spelling(of:in:)`), in the first real directory of its parent that has any
    /// spelling of its name; where the layer has none, as far as the layer has the names and
    /// the rest as given (what is made there keeps the spelling it was asked by). Without
    /// folding, `path` itself.
    public func spelled(_ path: LayerPath) -> LayerPath {
        guard spellings != nil, !path.isRoot else { return path }
        let name = path.lastName
        // a directory that cannot be opened for another reason than its absence fails the
        // call made with the path as given
        guard let spellings, let (parents, deepest) = try? spelledPaths(path.parent) else { return path }
        guard !parents.isEmpty else { return deepest.appending(name) }
        var best: (path: LayerPath, name: [UInt8])? = nil
        for parent in parents {
            let found = try? withDirectoryOpenedOnDemand(parent) { open in spellings.spelling(of: name, in: parent, open) }
            guard let spelled = found ?? nil else { continue }
            if best.map({ spelled.lexicographicallyPrecedes($0.name) }) ?? true { best = (parent, spelled) }
        }
        return best.map { $0.path.appending($0.name) } ?? parents[0].appending(name)
    }

    /// The layer's spelling of `name` in the real directories `dirs`: of every spelling in any
    /// of them, the first in byte order (in the first directory that has it), with the index of
    /// that directory; nil when none holds a spelling of it.
    func spelling(of name: [UInt8], in dirs: SpelledDirectories) -> (directory: Int, name: [UInt8])? {
        guard let spellings else { return (0, name) }
        var best: (directory: Int, name: [UInt8])? = nil
        for (index, dir) in dirs.paths.enumerated() {
            guard let spelled = spellings.spelling(of: name, in: dir, { dirs.descriptors[index] }) else { continue }
            if best.map({ spelled.lexicographicallyPrecedes($0.name) }) ?? true { best = (index, spelled) }
        }
        return best
    }

    /// Every spelling of `name` in the real directories `dirs`, in the order `spelling` takes
    /// them: by spelling in byte order, then by directory.
    func spellings(of name: [UInt8], in dirs: SpelledDirectories) -> [(directory: Int, name: [UInt8])] {
        guard let spellings else { return [(0, name)] }
        var all: [(directory: Int, name: [UInt8])] = []
        for (index, dir) in dirs.paths.enumerated() {
            all += spellings.spellings(of: name, in: dir, { dirs.descriptors[index] }).map { (index, $0) }
        }
        return all.sorted { a, b in a.name == b.name ? a.directory < b.directory : a.name.lexicographicallyPrecedes(b.name) }
    }

    /// The layer's spelling of `name` in its real directory `dir` open as `dirfd`: `name`
    /// itself without folding; nil when the directory holds no spelling of it.
    func spelling(of name: [UInt8], in dir: LayerPath, at dirfd: Int32) -> [UInt8]? {
        guard let spellings else { return name }
        return spellings.spelling(of: name, in: dir) { dirfd }
    }
}
