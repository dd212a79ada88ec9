/// For each directory of a view that many patches hold, which of them hold each name: built
/// once from the patches' records of the directory (see `LayerIndex`) the first time the
/// directory is looked in, and kept with the view's directory descriptors (`DirectoryCache`)
/// until the records may have changed: every invalidation (exact, of a path, of everything,
/// `-o watch`'s) and every copy-up empties it with them, and a swap makes a new view with an
/// empty one. Unlike the descriptors, which the cache drops when full, a directory's map stays:
/// under thousands of thin patches (about 1,700 of 10,000 hold each top directory), asking each
/// patch for its record again at every look would cost as much as a walk over the patches.
///
/// A lookup of a name then costs a hash probe: the patches with an entry of it (file,
/// directory or whiteout device), and those with a whiteout file for it, top first (see
/// `KnownNames`, which adds the substitution's and the main bundle's names read from disk).
/// Only the patches of the directory's placement are mapped, so an opaque directory above
/// cuts off those below it as the placement does.
///
/// Memory: per mapped directory, its patches' records by layer (shared with the index) and
/// each name's holders, about 110 bytes a patch that holds the directory and 16 a name.
/// Directories in fewer than `KnownNames.manyLayers` patches are not mapped: asking those few
/// patches costs less than keeping them.
///
/// Lock: `state`, a leaf, held only to find, keep or drop a map; a map is built outside it.
final class NameMap: Sendable {
    /// One directory of the view, as the patches of one placement hold it.
    struct Directory: Sendable {
        let placement: Placement
        /// The patches that have the directory, top first.
        let patches: [Int]
        /// Their records of it, by layer.
        let records: [Int: LayerIndex.Directory]
        /// Each name a patch holds: an entry of it, or a whiteout file for it, by the name's
        /// `KnownNames.hash` and then by layer (top first), 16 bytes each.
        let names: [Held]

        struct Held: Sendable {
            let hash: Int
            let layer: UInt16
            let isWhiteoutFile: Bool
        }

        /// The patches with an entry of the name whose hash is `hash`, and those with a
        /// whiteout file for it, top first.
        func holding(_ hash: Int) -> (entries: [UInt16], whiteouts: [UInt16]) {
            // the first of the hash, by halves
            var (low, high) = (0, names.count)
            while low < high {
                let middle = (low + high) / 2
                if names[middle].hash < hash { low = middle + 1 } else { high = middle }
            }
            var entries: [UInt16] = []
            var whiteouts: [UInt16] = []
            while low < names.count && names[low].hash == hash {
                if names[low].isWhiteoutFile { whiteouts.append(names[low].layer) } else { entries.append(names[low].layer) }
                low += 1
            }
            return (entries, whiteouts)
        }
    }

    private struct State {
        var kept: [LayerPath: Directory] = [:]
        /// Bumped by each `removeAll`: a map built from records read before is not kept.
        var cleared: UInt64 = 0
    }
    private let state = Locked(State(), rank: .nameMap)

    init() {}

    /// The map of the directory at `path` as merged by `placement`, kept or built from the
    /// records of `patches` (those whose index says they have it, top first; asked only when
    /// the map is not kept); nil where fewer than `KnownNames.manyLayers` of them are in the
    /// placement. Throws what keeps a record from being read.
    func directory(_ path: LayerPath, _ placement: Placement, layers: LayerStack, watch: LayerWatch,
                   patches: () throws(Errno) -> [UInt16]) throws(Errno) -> Directory? {
        let (known, cleared) = state.withLock { ($0.kept[path], $0.cleared) }
        if let known, known.placement == placement { return known }
        let range = layers.indices(of: placement)
        let held = try patches().lazy.map(Int.init).filter { range.contains($0) }
        guard held.count >= KnownNames.manyLayers else { return nil }
        let epoch = watch.epoch
        var mapped: [Int] = []
        var records: [Int: LayerIndex.Directory] = [:]
        records.reserveCapacity(held.count)
        var count = 0
        for number in held {
            let layer = layers[number]
            guard let index = layer.index, let record = try index.directory(path, of: layer, watch: watch, epoch: epoch) else {
                continue
            }
            mapped.append(number)
            records[number] = record
            count += record.entries.entries.count
        }
        var names: [Directory.Held] = []
        names.reserveCapacity(count)
        for number in mapped {
            guard let record = records[number] else { continue }
            record.entries.withNames { list in
                for entry in record.entries.entries {
                    let name = list.name(entry)
                    let hidden = Whiteout.hiddenName(name)
                    names.append(Directory.Held(hash: KnownNames.hash(hidden ?? name), layer: UInt16(number),
                                                isWhiteoutFile: hidden != nil))
                }
            }
        }
        // by hash, then top first
        names.sort { $0.hash < $1.hash || ($0.hash == $1.hash && $0.layer < $1.layer) }
        let directory = Directory(placement: placement, patches: mapped, records: records, names: names)
        state.withLock { s in
            if s.cleared == cleared { s.kept[path] = directory }
        }
        return directory
    }

    /// The map kept of the directory at `path`, whatever its placement.
    func kept(_ path: LayerPath) -> Directory? {
        state.withLock { $0.kept[path] }
    }

    /// Drops every map (the records they were built from may have changed).
    func removeAll() {
        let dropped = state.withLock { s -> [LayerPath: Directory] in
            s.cleared &+= 1
            defer { s.kept = [:] }
            return s.kept
        }
        _ = dropped  // freed here, outside the lock
    }

    /// The number of directories mapped (for `.stats` and tests).
    var count: Int { state.withLock { $0.kept.count } }
}
