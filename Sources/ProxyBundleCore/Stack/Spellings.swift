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
/// A directory is read once, into a table from each name's key to its spelling, kept until an
/// invalidation (like every cached answer); the substitution's tables are forgotten at every
/// change made through the mount too (see `Overlay.forgetOtherSpellings`).
public final class Spellings: Sendable {
    private struct State {
        var tables: [LayerPath: [[UInt8]: [UInt8]]] = [:]
        /// Bumped when the tables are forgotten: a table read before is not kept.
        var generation: UInt64 = 0
    }
    private let state = Locked(State())
    /// Directories whose tables are kept before all are dropped: about 64 MB of names at most
    /// for directories of a thousand names.
    static let limit = 4096

    init() {}

    /// The layer's spelling of `name` in its directory `dir` (spelled as the layer spells it),
    /// open as `open()` gives it (an O_PATH descriptor the caller keeps, or -1); nil when the
    /// directory holds no spelling of it.
    func spelling(of name: [UInt8], in dir: LayerPath, _ open: () -> Int32) -> [UInt8]? {
        let key = CaseFold.keyIfDifferent(name) ?? name
        let (known, generation) = state.withLock { ($0.tables[dir], $0.generation) }
        if let known { return known[key] }
        let fd = open()
        guard fd >= 0, let table = Spellings.table(of: fd) else { return nil }
        keep(table, for: dir, readIn: generation)
        return table[key]
    }

    /// Keeps `table` as `dir`'s, unless the tables were forgotten since it was read.
    private func keep(_ table: [[UInt8]: [UInt8]], for dir: LayerPath, readIn generation: UInt64) {
        state.withLock { s in
            guard s.generation == generation else { return }
            if s.tables.count >= Spellings.limit { s.tables.removeAll(keepingCapacity: true) }
            s.tables[dir] = table
        }
    }

    /// Keeps the table of `dir` (spelled as the layer spells it) from its entries `list` and
    /// their `keys`, read for a listing: its lookups then need not read the directory again. A
    /// name that is its own key shares one array with it.
    func learn(_ list: EntryList, keys: [[UInt8]], in dir: LayerPath) {
        let (known, generation) = state.withLock { ($0.tables[dir] != nil, $0.generation) }
        guard !known else { return }
        var table: [[UInt8]: [UInt8]] = [:]
        table.reserveCapacity(list.entries.count)
        list.withNames { names in
            for (index, entry) in list.entries.enumerated() {
                let key = keys[index]
                let name = names.name(entry)
                if let known = table[key], !name.lexicographicallyPrecedes(known) { continue }
                table[key] = name.elementsEqual(key) ? key : Array(name)
            }
        }
        keep(table, for: dir, readIn: generation)
    }

    /// Adds `spelling` to `table`, where it is its key's first spelling in byte order.
    private static func add(_ spelling: [UInt8], to table: inout [[UInt8]: [UInt8]]) {
        let key = CaseFold.keyIfDifferent(spelling) ?? spelling
        if let known = table[key], !spelling.lexicographicallyPrecedes(known) { return }
        table[key] = spelling
    }

    /// Forgets every table read: the layer may have changed.
    func forget() {
        state.withLock { s in
            s.tables.removeAll()
            s.generation &+= 1
        }
    }

    /// From each key of the names in the directory open as `fd`, the first of its spellings in
    /// byte order; nil when it cannot be read.
    static func table(of fd: Int32) -> [[UInt8]: [UInt8]]? {
        let dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dir >= 0 else { return nil }
        var table: [[UInt8]: [UInt8]] = [:]
        let read: Void? = try? Sys.readDirectory(dir) { entry, _ in
            Sys.withName(entry) { name, length in
                let bytes = UnsafeRawBufferPointer(start: name, count: length)
                if length <= 2 && bytes.allSatisfy({ $0 == 0x2E }) { return }
                add(Array(bytes), to: &table)
            }
        }
        return read == nil ? nil : table
    }
}

extension Layer {
    /// `path` as this layer spells it, for a mount that folds names: each name replaced by the
    /// layer's spelling of it, as far as the layer has them (the rest as given: what is made
    /// there keeps the spelling it was asked by). Without folding, `path` itself.
    public func spelled(_ path: LayerPath) -> LayerPath {
        guard let spellings, !path.isRoot else { return path }
        let names = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        var real = LayerPath.root
        var dirfd = rootFD
        defer { if dirfd != rootFD { Sys.close(dirfd) } }
        for (index, name) in names.enumerated() {
            guard let spelled = spellings.spelling(of: name, in: real, { dirfd }) else {
                for rest in names[index...] { real = real.appending(rest) }
                return real
            }
            real = real.appending(spelled)
            guard index < names.count - 1 else { break }
            let next = spelled.withCStringCopy { p in
                (try? Sys.openat2(dirfd, p, flags: pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                  resolve: Layer.resolve)) ?? -1
            }
            if dirfd != rootFD { Sys.close(dirfd) }
            dirfd = next
            if next < 0 {
                for rest in names[(index + 1)...] { real = real.appending(rest) }
                return real
            }
        }
        return real
    }

    /// The layer's spelling of `name` in its directory `dir` (spelled as the layer spells it,
    /// see `spelled`) open as `dirfd`: `name` itself without folding; nil when the directory
    /// holds no spelling of it.
    func spelling(of name: [UInt8], in dir: LayerPath, at dirfd: Int32) -> [UInt8]? {
        guard let spellings else { return name }
        return spellings.spelling(of: name, in: dir) { dirfd }
    }
}
