#if canImport(Glibc)
import Glibc
#endif

/// The directory descriptors of recently looked-in directory nodes. An entry serves while its
/// node keeps the placement it was opened with; a node renamed through the mount keeps its
/// entry (the descriptors follow the directories, not their names). Emptied by invalidation,
/// since directories may have been replaced on disk; when full, the half used least recently
/// goes, so that the directories a walk is in (and their names, see `KnownNames`) stay.
///
/// Only reads of names and attributes use them: lookups, the checks before a change, a
/// directory's own attributes, and the extended attributes of its entries. A directory moved
/// away behind the daemon's back (even out of its layer) is still looked in until the next
/// invalidation, as a local file system serves a directory a process has open; everything
/// that opens, reads or changes an entry goes by its path from the layer's root, so it never
/// follows such a move.
final class DirectoryCache: Sendable {
    /// Each entry with when it was last used (a count of uses of the cache).
    private let entries = Locked(Entries(), rank: .directoryCache)
    private struct Entries {
        var kept: [NodeID: (dirs: DirectoryDescriptors, used: UInt64)] = [:]
        var uses: UInt64 = 0
        /// By path, the patches that have a directory there (see `patches(holding:)`).
        var patchHolders: [LayerPath: [UInt16]] = [:]
        /// Those of the view this one replaced, and each layer's number here by its number
        /// there (see `carry`).
        var carriedHolders: [LayerPath: [UInt16]] = [:]
        var renumbered: [UInt16] = []

        /// The patches that have a directory at `path`, known or carried (renumbered now).
        mutating func holders(_ path: LayerPath) -> [UInt16]? {
            if let known = patchHolders[path] { return known }
            guard let other = carriedHolders.removeValue(forKey: path) else { return nil }
            let numbers = renumbered
            let found = other.map { numbers[Int($0)] }.sorted()
            patchHolders[path] = found
            return found
        }

        /// The entry of `id`, now its most recently used.
        mutating func use(_ id: NodeID) -> DirectoryDescriptors? {
            guard let index = kept.index(forKey: id) else { return nil }
            uses += 1
            kept.values[index].used = uses
            return kept.values[index].dirs
        }

        /// Keeps the `limit / 2` entries used most recently and drops the others; returns
        /// those, to be closed outside the lock.
        mutating func evict(keeping limit: Int) -> [DirectoryDescriptors] {
            let dropped = kept.sorted { $0.value.used > $1.value.used }.dropFirst(limit / 2)
            for (id, _) in dropped { kept[id] = nil }
            return dropped.map(\.value.dirs)
        }
    }
    /// Told of every directory opened here, before any name is resolved in it.
    let watch: LayerWatch
    /// Whether directories missed in often have their names read (see `KnownNames`).
    let knowsNames: Bool
    /// Which patches hold each name of the directories many patches hold (see `NameMap`):
    /// kept when the descriptors are dropped for room, emptied with them by `removeAll`.
    let names = NameMap()
    /// Whose version tells whether a path still led where its node is.
    let nodes: NodeTable

    /// The node table's generation of the view this cache belongs to (see `StackView`).
    let generation: UInt32

    init(watch: LayerWatch, nodes: NodeTable, knowsNames: Bool) {
        self.watch = watch
        self.nodes = nodes
        self.knowsNames = knowsNames
        generation = nodes.generation.number
    }

    /// Whether names and placements are as they were at the table's `version` `located`, in
    /// this cache's generation (a view outlived by a swap keeps and watches nothing more).
    private func isCurrent(_ located: UInt64) -> Bool {
        let (version, number) = nodes.versionAndGeneration
        return version == located && number == generation
    }
    /// Directories kept: about 512 descriptors (directories in two layers: 256 of them), well
    /// below the usual limit of 1,024 open files, or where the limit is higher (the daemon
    /// raises it to its hard limit, which thousands of layers need), a quarter of what the
    /// layers leave of it, up to 8,192; counted by the descriptors the directory just opened
    /// holds (a patch looked at through its index may hold none, the roots are the layers').
    static func limit(descriptors: Int, layers: Int) -> Int {
        let budget = min(8192, max(512, (openFileLimit - layers) / 4))
        return max(16, budget / max(1, descriptors))
    }

    /// The process's limit of open files, read once (after the daemon raised it).
    private static let openFileLimit: Int = {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(min(limit.rlim_cur, 1 << 20))
    }()

    /// The layers that may hold the directory at `location`: where the names of its parent
    /// were read (see `KnownNames`), those that hold the name; otherwise, where patches have
    /// indexes, the layers without one and the patches that have the directory (see
    /// `patches(holding:)`). Nil when neither tells.
    private func holding(_ location: NodeTable.Location, layers: LayerStack, located: UInt64) throws(Errno) -> [UInt16]? {
        if let name = location.path.bytes.split(separator: UInt8(ascii: "/")).last,
           let parent = entries.withLock({ $0.use(location.parent) }),
           let known = parent.known?.holding(Array(name))?.entries {
            return known
        }
        guard indexes(layers) else { return nil }
        return layers.unindexed + (try patches(holding: location.path, layers: layers, located: located))
    }

    /// The layers that may have the directory at `path`: those without an index and the
    /// patches whose index says they have it (see `patches(holding:)`); nil where patches are
    /// not indexed. `located`: as for `mapped`.
    func holders(_ path: LayerPath, layers: LayerStack, located: UInt64) throws(Errno) -> [UInt16]? {
        guard indexes(layers) else { return nil }
        return layers.unindexed + (try patches(holding: path, layers: layers, located: located))
    }

    /// Whether patches' indexes tell which of them hold a directory (not where names fold).
    private func indexes(_ layers: LayerStack) -> Bool {
        knowsNames && !layers.foldsNames && layers.hasIndexedPatches
    }

    /// The view's map of the directory at `path` merged by `placement` (see `NameMap`), where
    /// patches are indexed and many of them have it. `located`: the node table's version
    /// before `path` was found.
    func mapped(_ path: LayerPath, _ placement: Placement, layers: LayerStack, located: UInt64) throws(Errno) -> NameMap.Directory? {
        guard indexes(layers) else { return nil }
        return try names.directory(path, placement, layers: layers, watch: watch) { () throws(Errno) -> [UInt16] in
            try patches(holding: path, layers: layers, located: located)
        }
    }

    /// Whether patch `number`'s directory at `path` (which its index says it has) is opaque:
    /// from the view's map of the directory, built now if many patches have it, so that the
    /// lookup that finds the directory reads its patches' records once, for itself and for
    /// the lookups in it; else from the patch's record. `located`: as for `mapped`.
    func isOpaque(_ path: LayerPath, in number: Int, layers: LayerStack, located: UInt64) throws(Errno) -> Bool {
        let layer = layers[number]
        guard let index = layer.index else { return false }
        let all = Placement(top: 0, bottom: layers.mainIndex, isDirectory: true)
        if let map = try mapped(path, all, layers: layers, located: located), map.maps(number) { return map.isOpaque(number) }
        return try index.directory(path, of: layer, watch: watch)?.isOpaque ?? false
    }

    /// The patches whose index says they have a directory at `path`, top first (see
    /// `patches(holding:)`); nil where patches are not indexed.
    func indexedPatches(holding path: LayerPath, layers: LayerStack) -> [Int]? {
        guard indexes(layers), let patches = try? patches(holding: path, layers: layers, located: nodes.version) else { return nil }
        return patches.map(Int.init)
    }

    /// The patches with an index whose index says they have a directory at `path`, top
    /// first: those of the directory above it whose record of it names such a subdirectory
    /// (the root: every one), found through its map where it has one of all of them (see
    /// `NameMap`). Kept by path until an invalidation (memory: two bytes a patch
    /// for each directory of the view a patch has), so that finding a directory's patches
    /// costs one look at each patch of its parent, once, whatever the directories kept.
    private func patches(holding path: LayerPath, layers: LayerStack, located: UInt64) throws(Errno) -> [UInt16] {
        if let known = entries.withLock({ $0.holders(path) }) { return known }
        let found: [UInt16]
        if path.isRoot {
            found = layers.indexed
        } else {
            let name = path.lastName
            let parentPath = path.parent
            let epoch = watch.epoch
            var holders: [UInt16] = []
            let parents = try patches(holding: parentPath, layers: layers, located: located)
            if let map = names.kept(parentPath), map.patches.count == parents.count {
                // the parent's map, of all these patches, names those with a directory of the
                // name (a rare collision of hashes only costs a look at a patch's index)
                let whole = NameMap.Directory(all: map, layers: layers.layers.indices)
                holders = name.withUnsafeBytes { whole.holding(KnownNames.hash($0), directories: true) }.entries
            } else {
                for number in parents {
                    let layer = layers[Int(number)]
                    guard let index = layer.index, let parent = try index.directory(parentPath, of: layer, watch: watch, epoch: epoch),
                          parent.subdirectory(name) != nil else { continue }
                    holders.append(number)
                }
            }
            found = holders
        }
        entries.withLock { entries in
            if isCurrent(located) { entries.patchHolders[path] = found }
        }
        return found
    }

    /// The descriptors of directory node `id` at `location` (fresh), opened if needed.
    /// `located` is the node table's version before `location` was computed: if names
    /// changed since, the path may have led to another directory (a rename of an ancestor),
    /// so what it opened serves this once but is neither kept nor watched for the node; so do
    /// descriptors that miss a layer the placement names.
    func descriptors(_ id: NodeID, _ location: NodeTable.Location, located: UInt64,
                     layers: LayerStack, forReading: Bool = false) throws(Errno) -> DirectoryDescriptors {
        if let cached = cached(id, location.placement) { return cached }
        let opened = try DirectoryDescriptors(location.path, location.placement, layers: layers,
                                              index: knowsNames ? watch : nil, knowsNames: knowsNames && isCurrent(located),
                                              holding: try holding(location, layers: layers, located: located),
                                              forReading: forReading,
                                              mapped: try mapped(location.path, location.placement, layers: layers, located: located))
        // a directory missing from a layer its placement names serves this once: kept, its
        // names there would stay unseen (and its known names lack them) until an invalidation
        guard isCurrent(located), opened.isComplete else { return opened }
        watch.watch(id, opened)
        // checked again under the lock that `removeAll` takes, after a change bumped the version
        var dropped: [DirectoryDescriptors] = []
        let kept = entries.withLock { entries -> Bool in
            guard isCurrent(located) else { return false }
            let limit = DirectoryCache.limit(descriptors: opened.openCount, layers: layers.count)
            if entries.kept.count >= limit { dropped = entries.evict(keeping: limit) }
            entries.uses += 1
            entries.kept[id] = (opened, entries.uses)
            return true
        }
        if !kept { watch.unwatch([id]) }
        dropped.removeAll()  // closed here, outside the lock, as the last references go
        return opened
    }

    /// The descriptors kept for directory node `id`, if they were opened with `placement`.
    func cached(_ id: NodeID, _ placement: Placement) -> DirectoryDescriptors? {
        guard let cached = entries.withLock({ $0.use(id) }), cached.placement == placement else { return nil }
        return cached
    }

    /// `name` was made in directory node `id` through the mount.
    func added(_ name: [UInt8], in id: NodeID) {
        entries.withLock { $0.kept[id]?.dirs }?.known?.added(name)
    }

    /// Takes what `other` learned of which patches hold what (a view of the same patches in
    /// another order, replaced by this one's: see `NameMap.carry`), renumbered with
    /// `renumbered` (a layer's number here by its number there) where used. Called before
    /// this cache is used.
    func carry(_ other: DirectoryCache, renumbered: [UInt16]) {
        names.carry(other.names, renumbered: renumbered)
        let holders = other.entries.withLock { $0.patchHolders }
        entries.withLock { entries in
            entries.carriedHolders = holders
            entries.renumbered = renumbered
        }
    }

    func removeAll() {
        names.removeAll()
        let dropped = entries.withLock { entries -> Entries in
            let all = entries
            entries = Entries()
            return all
        }
        _ = dropped  // closed here, outside the lock, as the last references go
    }
}
