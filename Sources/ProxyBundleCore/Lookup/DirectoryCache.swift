#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// O_PATH descriptors of one directory in each layer that has it. A name is then looked up
/// with one `fstatat` per layer, relative to the directory itself: no walk of the path from
/// the layer's root, and (the name being a single component, never followed) no way out of
/// the layer. Closed when the last user lets go.
final class DirectoryDescriptors: Sendable {
    /// One per layer of the stack, -1 where the layer has no such directory or is not merged.
    private let descriptors: [Int32]
    /// The placement the directory had when opened: a change (a copy-up) makes them outdated.
    let placement: Placement
    let isRoot: Bool
    /// The directory's names once read (kept descriptors only), to answer misses without a system call.
    let known: KnownNames?
    /// Whether the directory was opened only in the layers its parent's names said hold it:
    /// then the others need not be looked in at all (see `init`).
    let isFiltered: Bool
    /// Held so the roots' descriptors stay open while in use.
    private let layers: LayerStack

    /// Opens the directory at `path` in each layer of `placement`, or, where the parent's names
    /// tell which layers hold it (`holding`), in those and the substitution only: with thousands
    /// of layers, the others would each cost a failed open. `forReading`: opened for reading
    /// (not O_PATH), for a listing about to read them (see `takeUnread`).
    init(_ path: LayerPath, _ placement: Placement, layers: LayerStack, knowsNames: Bool = false,
         holding: [UInt16]? = nil, forReading: Bool = false) throws(Errno) {
        self.placement = placement
        // where names fold, each layer's real directories are opened for their spellings
        unread = Locked(forReading && !path.isRoot && !layers.foldsNames)
        self.layers = layers
        known = knowsNames ? KnownNames(foldsNames: layers.foldsNames) : nil
        isRoot = path.isRoot
        isFiltered = holding != nil
        var opened = [Int32](repeating: -1, count: layers.count)
        var spelled = [SpelledDirectories?](repeating: nil, count: layers.foldsNames ? layers.count : 0)
        let range = layers.indices(of: placement)
        let tried = holding.map { held in (range.contains(0) ? [0] : []) + held.map(Int.init).filter { $0 > 0 && range.contains($0) } }
        for index in tried ?? Array(range) {
            let layer = layers[index]
            if !spelled.isEmpty {
                // the real directories own their descriptors
                spelled[index] = try layer.spelledDirectories(path).found
                opened[index] = spelled[index]?.descriptors[0] ?? -1
                continue
            }
            if path.isRoot {
                opened[index] = layer.rootFD
                continue
            }
            do throws(Errno) {
                opened[index] = try absentAsNil { () throws(Errno) -> Int32 in
                    try layer.open(path, flags: (forReading ? O_RDONLY : pb_O_PATH) | pb_O_DIRECTORY)
                } ?? -1
            } catch {
                for fd in opened where fd >= 0 { Sys.close(fd) }
                throw error
            }
        }
        descriptors = opened
        spelledDirectories = spelled
        present = opened.indices.filter { opened[$0] >= 0 }
    }

    /// Whether the descriptors were opened for reading and nothing read them yet.
    private let unread: Locked<Bool>

    /// True once, for the listing the descriptors were opened for: it reads each layer's
    /// entries through them, rather than opening each directory a second time by its path.
    /// Every later listing goes by path, as every read does (see `DirectoryCache`): these
    /// follow a directory moved away behind the daemon's back.
    func takeUnread() -> Bool {
        unread.withLock { unread in
            defer { unread = false }
            return unread
        }
    }

    /// Where names fold (`-o casefold`): the real directories each layer merges here (see
    /// `SpelledDirectories`), whose first one's descriptor is the layer's in `descriptors`.
    /// Empty where names do not fold.
    private let spelledDirectories: [SpelledDirectories?]

    /// Whether names are folded: a name is then looked for by its spelling in each layer.
    var foldsNames: Bool { !spelledDirectories.isEmpty }

    /// Layer `index`'s spelling of `name` in this directory, and the descriptor of the real
    /// directory that holds it (see `Layer.spelling(of:in:)`): `name` itself and the layer's
    /// descriptor where names are not folded; nil where the layer holds no spelling of it (or
    /// not the directory).
    func spelled(_ name: [UInt8], in index: Int) -> (fd: Int32, name: [UInt8])? {
        guard foldsNames else { return (self[index], name) }
        guard let dirs = self.directories(in: index), let found = layers[index].spelling(of: name, in: dirs) else { return nil }
        return (dirs.descriptors[found.directory], found.name)
    }

    /// Every spelling of `name` in layer `index`'s real directories here, with the descriptor
    /// of the directory holding each, in the order `spelled` takes them.
    func allSpelled(_ name: [UInt8], in index: Int) -> [(fd: Int32, name: [UInt8])] {
        guard foldsNames else { return self[index] >= 0 ? [(self[index], name)] : [] }
        guard let dirs = self.directories(in: index) else { return [] }
        return layers[index].spellings(of: name, in: dirs).map { (dirs.descriptors[$0.directory], $0.name) }
    }

    private func directories(in index: Int) -> SpelledDirectories? {
        index < spelledDirectories.count ? spelledDirectories[index] : nil
    }

    /// The descriptors of every real directory layer `index` has here: one, or where names
    /// fold, each directory of the name merged (none where the layer lacks it).
    func allDescriptors(in index: Int) -> [Int32] {
        if let dirs = directories(in: index) { return dirs.descriptors }
        return self[index] >= 0 ? [self[index]] : []
    }

    /// Whether layer `index` has no more than one real directory here: an entry it lists is
    /// then in `self[index]`.
    func hasOneDirectory(in index: Int) -> Bool {
        (directories(in: index)?.paths.count ?? 1) <= 1
    }

    deinit {
        guard !isRoot, !foldsNames else { return }
        for fd in descriptors where fd >= 0 { Sys.close(fd) }
    }

    /// The directory's descriptor in layer `index`, -1 when it has none.
    subscript(index: Int) -> Int32 {
        index < descriptors.count ? descriptors[index] : -1
    }

    /// The layers that have the directory, top first.
    let present: [Int]

    /// Whether the top and bottom layers of the placement had the directory when it was opened
    /// (a concurrent change or one behind the daemon's back may have taken it away).
    var isComplete: Bool {
        self[Int(placement.top)] >= 0 && self[Int(placement.bottom)] >= 0
    }

    /// Where names fold: the entries of the directory in layer `index`, read for a listing,
    /// are how that layer spells its names (its lookups need not read them again), unless the
    /// layer merges several directories here (each learnt as it was read).
    func learnSpellings(_ list: EntryList, keys: [FoldedName], in index: Int) {
        guard let dirs = directories(in: index), dirs.paths.count == 1 else { return }
        layers[index].spellings?.learn(list, keys: keys, in: dirs.paths[0])
    }

    /// The attributes of the directory in layer `index`; nil if it was not there when opened.
    /// A method, so that these descriptors stay alive (and open) during the call: a caller
    /// holding only a descriptor number may see the last reference go, and the number closed
    /// or reused, before it is used.
    func attributes(in index: Int) throws(Errno) -> stat? {
        let fd = self[index]
        return fd >= 0 ? try Sys.fstat(fd) : nil
    }
}

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
    private let entries = Locked(Entries())
    private struct Entries {
        var kept: [NodeID: (dirs: DirectoryDescriptors, used: UInt64)] = [:]
        var uses: UInt64 = 0

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
    /// below the usual limit of 1,024 open files; counted by the layers the directory just
    /// opened is in.
    static func limit(layers: Int) -> Int { max(16, 512 / max(1, layers)) }

    /// The layers that hold the directory at `location`, where the names of its parent were
    /// read (see `KnownNames`); nil when they were not.
    private func holding(_ location: NodeTable.Location) -> [UInt16]? {
        guard let name = location.path.bytes.split(separator: UInt8(ascii: "/")).last,
              let parent = entries.withLock({ $0.use(location.parent) }) else { return nil }
        return parent.known?.holding(Array(name))?.entries
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
                                              knowsNames: knowsNames && isCurrent(located),
                                              holding: holding(location), forReading: forReading)
        // a directory missing from a layer its placement names serves this once: kept, its
        // names there would stay unseen (and its known names lack them) until an invalidation
        guard isCurrent(located), opened.isComplete else { return opened }
        watch.watch(id, opened)
        // checked again under the lock that `removeAll` takes, after a change bumped the version
        var dropped: [DirectoryDescriptors] = []
        let kept = entries.withLock { entries -> Bool in
            guard isCurrent(located) else { return false }
            let limit = DirectoryCache.limit(layers: opened.present.count)
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

    func removeAll() {
        let dropped = entries.withLock { entries -> Entries in
            let all = entries
            entries = Entries()
            return all
        }
        _ = dropped  // closed here, outside the lock, as the last references go
    }
}
