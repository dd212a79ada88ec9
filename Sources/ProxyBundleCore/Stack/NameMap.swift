#if canImport(Glibc)
import Glibc
#endif

/// For each directory of a view that many patches hold, which of them hold each name: built
/// once from the patches' records of the directory (see `LayerIndex`) the first time the
/// directory is looked in or looked up, and kept with the view's directory descriptors
/// (`DirectoryCache`) until the records may have changed: every invalidation (exact, of a
/// path, of everything, `-o watch`'s) and every copy-up empties it with them, and a swap makes
/// a new view with an empty one, or, between orders of the same patches where it keeps what
/// stays (`PatchSwap`; not where it falls back to forgetting everything), with the maps of the
/// view it replaces, renumbered where used (see `carry`). Unlike the descriptors, which the cache drops when full, a
/// directory's map stays: under thousands of thin patches (about 1,700 of 10,000 hold each top
/// directory), asking each patch for its record again at every look would cost as much as a
/// walk over the patches.
///
/// A lookup of a name then costs a hash probe: the patches with an entry of it (file,
/// directory or whiteout device), and those with a whiteout file for it, top first (see
/// `KnownNames`, which adds the substitution's and the main bundle's names read from disk).
/// A map holds every patch that has the directory, whatever the placement it is merged with;
/// each use sees it through one placement (`Directory`), so an opaque directory above cuts off
/// the patches below it as the placement does. It also says which patches' directories are
/// opaque: the lookup that finds the directory learns where it stops merging from the map its
/// own lookups then use.
///
/// Memory: per mapped directory, two bytes for each patch that holds it and 16 bytes a name;
/// the records themselves stay in the patches' indexes, asked again where a use needs one.
/// Directories in fewer than `KnownNames.manyLayers` patches are not mapped: asking those few
/// patches costs less than keeping them.
///
/// Lock: `state`, a leaf, held only to find, keep or drop a map; a map is built outside it.
final class NameMap: Sendable {
    /// One directory as every patch with an index record of it holds it.
    final class Names: Sendable {
        /// The patches that have the directory, top first.
        let patches: [UInt16]
        /// Those whose directory is opaque, top first.
        let opaque: [UInt16]
        /// Each name a patch holds: an entry of it, or a whiteout file for it, by the name's
        /// `KnownNames.hash` and then by layer (top first), 16 bytes each.
        let names: [Held]

        init(patches: [UInt16], opaque: [UInt16], names: [Held]) {
            self.patches = patches
            self.opaque = opaque
            self.names = names
        }
    }

    struct Held: Sendable {
        let hash: Int
        let layer: UInt16
        let isWhiteoutFile: Bool
        /// The entry is a directory.
        let isDirectory: Bool
    }

    /// A map seen through the placement of one use: only the patches of its layers.
    struct Directory: Sendable {
        let all: Names
        let layers: Range<Int>

        /// The patches of the placement that have the directory, top first.
        var patches: ArraySlice<UInt16> {
            let patches = all.patches
            return patches[NameMap.first(patches, atLeast: layers.lowerBound) ..< NameMap.first(patches, atLeast: layers.upperBound)]
        }

        /// Whether patch `layer` is of the placement and has the directory.
        func maps(_ layer: Int) -> Bool {
            guard layers.contains(layer) else { return false }
            let at = NameMap.first(all.patches, atLeast: layer)
            return at < all.patches.count && Int(all.patches[at]) == layer
        }

        /// Whether patch `layer`'s directory is opaque.
        func isOpaque(_ layer: Int) -> Bool {
            let at = NameMap.first(all.opaque, atLeast: layer)
            return at < all.opaque.count && Int(all.opaque[at]) == layer
        }

        /// The patches of the placement with an entry of the name whose hash is `hash`, and
        /// those with a whiteout file for it, top first; `directories`: only entries that
        /// are directories.
        func holding(_ hash: Int, directories: Bool = false) -> (entries: [UInt16], whiteouts: [UInt16]) {
            let names = all.names
            // the first of the hash, by halves
            var (low, high) = (0, names.count)
            while low < high {
                let middle = (low + high) / 2
                if names[middle].hash < hash { low = middle + 1 } else { high = middle }
            }
            var entries: [UInt16] = []
            var whiteouts: [UInt16] = []
            while low < names.count && names[low].hash == hash {
                let held = names[low]
                low += 1
                guard layers.contains(Int(held.layer)) else { continue }
                if held.isWhiteoutFile {
                    whiteouts.append(held.layer)
                } else if held.isDirectory || !directories {
                    entries.append(held.layer)
                }
            }
            return (entries, whiteouts)
        }
    }

    /// The index of the first of `sorted` (ascending) at least `value`.
    fileprivate static func first(_ sorted: [UInt16], atLeast value: Int) -> Int {
        var (low, high) = (0, sorted.count)
        while low < high {
            let middle = (low + high) / 2
            if Int(sorted[middle]) < value { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private struct State {
        var kept: [LayerPath: Names] = [:]
        /// Bumped by each `removeAll`: a map built from records read before is not kept.
        var cleared: UInt64 = 0
        /// The maps of the view this one replaced, of the same patches in another order (see
        /// `carry`), and each layer's number here by its number there.
        var carried: [LayerPath: Names] = [:]
        var renumbered: [UInt16] = []

        /// The map of `path`, kept or carried (renumbered now, and kept).
        mutating func map(_ path: LayerPath) -> Names? {
            if let known = kept[path] { return known }
            guard let other = carried.removeValue(forKey: path) else { return nil }
            let numbers = renumbered
            func number(_ layer: UInt16) -> UInt16 { numbers[Int(layer)] }
            let names = other.names.map { Held(hash: $0.hash, layer: number($0.layer), isWhiteoutFile: $0.isWhiteoutFile,
                                               isDirectory: $0.isDirectory) }
            let map = Names(patches: other.patches.map(number).sorted(), opaque: other.opaque.map(number).sorted(),
                            names: names.sorted { $0.hash < $1.hash || ($0.hash == $1.hash && $0.layer < $1.layer) })
            kept[path] = map
            return map
        }
    }
    private let state = Locked(State(), rank: .nameMap)

    init() {}

    /// The map of the directory at `path` as merged by `placement`, kept or built from the
    /// records of `patches` (those whose index says they have it, top first; asked only when
    /// the map is not kept); nil where fewer than `KnownNames.manyLayers` patches have it.
    /// Throws what keeps a record from being read.
    func directory(_ path: LayerPath, _ placement: Placement, layers: LayerStack, watch: LayerWatch,
                   patches: () throws(Errno) -> [UInt16]) throws(Errno) -> Directory? {
        let range = layers.indices(of: placement)
        let (known, cleared) = state.withLock { ($0.map(path), $0.cleared) }
        if let known { return Directory(all: known, layers: range) }
        let held = try patches()
        guard held.count >= KnownNames.manyLayers else { return nil }
        let epoch = watch.epoch
        var records: [(layer: UInt16, record: LayerIndex.Directory)] = []
        records.reserveCapacity(held.count)
        for number in held {
            let layer = layers[Int(number)]
            guard let index = layer.index, let record = try index.directory(path, of: layer, watch: watch, epoch: epoch) else {
                continue
            }
            records.append((number, record))
        }
        // kept at their exact size
        var names: [Held] = []
        names.reserveCapacity(records.reduce(0) { $0 + $1.record.entries.entries.count })
        for (number, record) in records {
            record.entries.withNames { list in
                for entry in record.entries.entries {
                    let name = list.name(entry)
                    let hidden = Whiteout.hiddenName(name)
                    names.append(Held(hash: KnownNames.hash(hidden ?? name), layer: number, isWhiteoutFile: hidden != nil,
                                      isDirectory: entry.type == UInt8(DT_DIR)))
                }
            }
        }
        // by hash, then top first
        names.sort { $0.hash < $1.hash || ($0.hash == $1.hash && $0.layer < $1.layer) }
        let all = Names(patches: records.map(\.layer), opaque: records.filter(\.record.isOpaque).map(\.layer), names: names)
        state.withLock { s in
            if s.cleared == cleared { s.kept[path] = all }
        }
        return Directory(all: all, layers: range)
    }

    /// The map kept of the directory at `path`, of every patch that has it.
    func kept(_ path: LayerPath) -> Names? {
        state.withLock { $0.map(path) }
    }

    /// Takes the maps `other` built (a view of the same patches in another order, just
    /// replaced by this one's: the records they were built from are the same), each used
    /// here once renumbered with `renumbered` (a layer's number here by its number there),
    /// the first time it is asked for: a swap between orders of 1,000 patches builds no map
    /// again, and renumbers only those used after it.
    func carry(_ other: NameMap, renumbered: [UInt16]) {
        let maps = other.state.withLock { $0.kept }
        state.withLock { s in
            s.carried = maps
            s.renumbered = renumbered
        }
    }

    /// Drops every map (the records they were built from may have changed).
    func removeAll() {
        let dropped = state.withLock { s -> [LayerPath: Names] in
            s.cleared &+= 1
            s.carried = [:]
            defer { s.kept = [:] }
            return s.kept
        }
        _ = dropped  // freed here, outside the lock
    }

    /// The number of directories mapped (for `.stats` and tests), carried ones included.
    var count: Int { state.withLock { $0.kept.count + $0.carried.count } }
}
