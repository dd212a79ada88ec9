#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// One directory of the view in each layer that has it: an O_PATH descriptor of it, and for a
/// patch, the record its index keeps of it (see `LayerIndex`). A name is then looked up with
/// one `fstatat` per layer, relative to the directory itself: no walk of the path from the
/// layer's root, and (the name being a single component, never followed) no way out of the
/// layer; in a patch, only where its record holds the name. Closed when the last user lets go.
final class DirectoryDescriptors: Sendable {
    /// The layers that have the directory, top first (see `present`), and each one's
    /// descriptor, `recordOnly` for a patch whose record serves without one (see `init`):
    /// as many as the layers that have it, not as the stack has (10,002 under 10,000 thin
    /// patches, of which a directory deep in the tree is in a handful).
    private let descriptors: [Int32]
    private static let recordOnly: Int32 = -2
    /// The records of the patches that have the directory, by layer, where the indexes served
    /// (see `LayerIndex`) and the directory is not mapped.
    private let records: [Int: LayerIndex.Directory]
    /// The view's map of the directory, where many patches have it (see `NameMap`): the
    /// records of the patches it maps are asked of their indexes where needed, not kept here.
    private let mapped: NameMap.Directory?
    /// The watch and its epoch the indexes were asked in.
    private let watch: LayerWatch?
    private let epoch: UInt64
    /// Whether the patches' indexes were asked (not where names fold or nothing is cached).
    private let indexing: Bool
    /// The placement the directory had when opened: a change (a copy-up) makes them outdated.
    let placement: Placement
    /// The directory's path in the layers (as the view spells it).
    let path: LayerPath
    let isRoot: Bool
    /// The directory's names once read (kept descriptors only), to answer misses without a system call.
    let known: KnownNames?
    /// Whether the directory was opened only in the layers its parent's names said hold it:
    /// then the others need not be looked in at all (see `init`).
    let isFiltered: Bool
    /// Held so the roots' descriptors stay open while in use.
    private let layers: LayerStack

    /// A patch whose record of the directory has at least `openedEntries` entries gets a
    /// descriptor of it too, where at most `openedPatches` patches have the directory: one
    /// `open` that saves two system calls for each name looked at there (`fstatat` beside it
    /// rather than an open by path, `fstat` and a close). A thin patch's directory holds a
    /// few names, each looked up once or not at all: it is looked at by its path. A directory
    /// in many patches (the root and those near it, under thousands of thin patches) would
    /// exhaust the descriptors a process may have.
    static let openedEntries = 32
    static let openedPatches = 16

    /// Opens the directory at `path` in each layer of `placement`, or, where the parent's names
    /// tell which layers hold it (`holding`), in those and the substitution only: with thousands
    /// of layers, the others would each cost a failed open. A patch with an index (asked only
    /// with `index`, the mount's watch) is asked its record instead, which says whether the patch
    /// has the directory without a system call once its parent was read. `forReading`: opened
    /// for reading (not O_PATH), for a listing about to read them (see `takeUnread`). `mapped`:
    /// the view's map of the directory (see `NameMap`), which says which patches it maps have
    /// the directory, without asking their indexes.
    init(_ path: LayerPath, _ placement: Placement, layers: LayerStack, index watch: LayerWatch? = nil,
         knowsNames: Bool = false, holding: [UInt16]? = nil, forReading: Bool = false,
         mapped: NameMap.Directory? = nil) throws(Errno) {
        self.placement = placement
        self.path = path
        // where names fold, each layer's real directories are opened for their spellings
        unread = Locked(forReading && !path.isRoot && !layers.foldsNames, rank: .directoryDescriptors)
        self.layers = layers
        isRoot = path.isRoot
        isFiltered = holding != nil
        var spelled = [SpelledDirectories?](repeating: nil, count: layers.foldsNames ? layers.count : 0)
        let range = layers.indices(of: placement)
        let indexing = watch != nil && !layers.foldsNames
        let mapped = indexing ? mapped : nil
        // the layers to look in, top first: those the parent's names say hold it and the
        // substitution; else, where the view's map has the directory, the layers without an
        // index and the patches it maps; else every layer of the placement
        let tried: [Int]
        if let holding {
            tried = (range.contains(0) ? [0] : []) + holding.lazy.map(Int.init).filter { $0 > 0 && range.contains($0) }
        } else if mapped != nil {
            tried = layers.unindexed.lazy.map(Int.init).filter { range.contains($0) }
        } else {
            tried = Array(range)
        }
        var opened: [(layer: Int, fd: Int32)] = []
        var records: [Int: LayerIndex.Directory] = [:]
        var recorded: [Int] = []
        let epoch = indexing ? watch?.epoch ?? 0 : 0
        self.mapped = mapped
        self.watch = watch
        self.epoch = epoch
        do throws(Errno) {
            for index in tried {
                let layer = layers[index]
                if mapped != nil, layer.index != nil { continue }  // see below
                if let watch, indexing, let layerIndex = layer.index {
                    if let record = try layerIndex.directory(path, of: layer, watch: watch, epoch: epoch) {
                        records[index] = record
                        recorded.append(index)
                        opened.append((index, DirectoryDescriptors.recordOnly))
                    }
                    continue
                }
                let fd: Int32
                if !spelled.isEmpty {
                    // the real directories own their descriptors
                    spelled[index] = try layer.spelledDirectories(path).found
                    fd = spelled[index]?.descriptors[0] ?? -1
                } else if path.isRoot {
                    fd = layer.rootFD
                } else {
                    fd = try absentAsNil { () throws(Errno) -> Int32 in
                        try layer.open(path, flags: (forReading ? O_RDONLY : pb_O_PATH) | pb_O_DIRECTORY)
                    } ?? -1
                }
                if fd != -1 { opened.append((index, fd)) }
            }
            unmapped = opened.map(\.layer).sorted()
            if let mapped {
                recorded = mapped.patches.map(Int.init)
                opened += recorded.map { ($0, DirectoryDescriptors.recordOnly) }
            }
            opened.sort { $0.layer < $1.layer }
            if recorded.count <= DirectoryDescriptors.openedPatches {
                for (slot, item) in opened.enumerated()
                where item.fd == DirectoryDescriptors.recordOnly
                    && (records[item.layer]?.entries.entries.count ?? 0) >= DirectoryDescriptors.openedEntries {
                    opened[slot].fd = path.isRoot ? layers[item.layer].rootFD : try absentAsNil { () throws(Errno) -> Int32 in
                        try layers[item.layer].open(path, flags: pb_O_PATH | pb_O_DIRECTORY)
                    } ?? DirectoryDescriptors.recordOnly
                }
            }
        } catch {
            if !path.isRoot && spelled.isEmpty { for item in opened where item.fd >= 0 { Sys.close(item.fd) } }
            throw error
        }
        descriptors = opened.map(\.fd)
        present = opened.map(\.layer)
        self.records = records
        self.indexing = indexing
        known = knowsNames ? KnownNames(foldsNames: layers.foldsNames, mapped: self.mapped, unmapped: unmapped) : nil
        spelledDirectories = spelled
        openCount = path.isRoot ? 0 : opened.lazy.filter { $0.fd >= 0 }.count
            + (recorded.isEmpty ? 0 : min(recorded.count, DirectoryDescriptors.lazilyOpened))
    }

    /// The descriptors this holds open (the roots' are the layers').
    let openCount: Int

    /// Whether layer `index` is looked at through its index record here.
    func isIndexed(_ index: Int) -> Bool {
        (!records.isEmpty && records[index] != nil) || mapped?.maps(index) == true
    }

    /// Layer `index`'s record of the directory, where its index serves: the one read when
    /// the descriptors were opened, or for a patch the map has, asked of its index now (nil
    /// if it cannot be read: the layer is then looked at through a descriptor).
    func record(in index: Int) -> LayerIndex.Directory? {
        if !records.isEmpty, let record = records[index] { return record }
        guard let mapped, mapped.maps(index), let watch, let layerIndex = layers[index].index else { return nil }
        return try? layerIndex.directory(path, of: layers[index], watch: watch, epoch: epoch)
    }

    /// The layers a listing looks in, top first: where the parent's names told which layers
    /// hold the directory, those that have it; where patches' indexes tell, those that have
    /// it and the layers without an index (read by path: the directory may have come since);
    /// else every layer of the placement. Never a walk over every layer of the stack where
    /// the indexes or names tell.
    func listedLayers() -> [Int] {
        let range = layers.indices(of: placement)
        if isFiltered { return present }
        guard indexing else { return Array(range) }
        var merged: [Int] = []
        var others = layers.unindexed.lazy.map(Int.init).filter { range.contains($0) }.makeIterator()
        var other = others.next()
        for index in present {
            while let next = other, next <= index {
                if next < index { merged.append(next) }
                other = others.next()
            }
            merged.append(index)
        }
        while let next = other {
            merged.append(next)
            other = others.next()
        }
        return merged
    }

    /// Whether layer `index` is a patch whose index says it lacks the directory.
    func lacks(_ index: Int) -> Bool {
        indexing && !isIndexed(index) && layers[index].index != nil
    }

    /// Whether layer `index` has the directory.
    func has(_ index: Int) -> Bool {
        slot(of: index) != nil
    }

    /// Where layer `index` is in `present` (and `descriptors`), nil where it lacks the directory.
    private func slot(of index: Int) -> Int? {
        var (low, high) = (0, present.count)
        while low < high {
            let middle = (low + high) / 2
            if present[middle] < index { low = middle + 1 } else { high = middle }
        }
        return low < present.count && present[low] == index ? low : nil
    }

    /// The attributes of entry `name` (also as the C string `p`) of the directory in layer
    /// `index`, which has it (lstat semantics): through the descriptor, or by its path.
    func attributes(of name: [UInt8], _ p: UnsafePointer<CChar>, in index: Int) throws(Errno) -> stat {
        let fd = descriptor(in: index)
        if fd >= 0 { return try Sys.lstatat(fd, p) }
        return try layers[index].attributes(path.appending(name))
    }

    /// The directory's descriptor in layer `index`; for a patch looked at through its record,
    /// opened the first time an entry of it is (up to `lazilyOpened` of them: each then costs
    /// one system call, the directory's attributes and an entry's extended attributes as its
    /// attributes); -1 where there is none, or no more may be opened.
    func descriptor(in index: Int) -> Int32 {
        guard let slot = slot(of: index) else { return -1 }
        let kept = descriptors[slot]
        guard kept == DirectoryDescriptors.recordOnly else { return kept }
        if isRoot { return layers[index].rootFD }
        let (known, room) = lazy.withLock { ($0[index], $0.count < DirectoryDescriptors.lazilyOpened) }
        if let known { return known }
        guard room, let fd = try? layers[index].open(path, flags: pb_O_PATH | pb_O_DIRECTORY) else { return -1 }
        let (used, extra) = lazy.withLock { opened -> (Int32, Int32?) in
            if let other = opened[index] { return (other, fd) }
            opened[index] = fd
            return (fd, nil)
        }
        if let extra { Sys.close(extra) }
        return used
    }

    /// The descriptors opened by `descriptor(in:)`, by layer.
    private let lazy = Locked<[Int: Int32]>([:], rank: .directoryDescriptors)
    static let lazilyOpened = 64

    /// Opens entry `name` of the directory in layer `index` with `flags` (never following a
    /// symlink), through the descriptor or by its path.
    func open(_ name: [UInt8], in index: Int, flags: Int32) throws(Errno) -> Int32 {
        let fd = descriptor(in: index)
        guard fd >= 0 else { return try layers[index].open(path.appending(name), flags: flags) }
        return try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
            try Sys.check { openat(fd, p, flags | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
        }
    }

    /// The entries of the directory in layer `index`: the record's, or read through the
    /// descriptors (every real directory where names fold); nil where the layer lacks it.
    func entries(in index: Int) throws(Errno) -> [EntryList]? {
        if let record = record(in: index) { return [record.entries] }
        let fds = allDescriptors(in: index)
        if fds.isEmpty { return nil }
        var lists: [EntryList] = []
        for fd in fds {
            let dir = try Sys.check { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            defer { Sys.close(dir) }
            lists.append(try Layer.entries(of: dir))
        }
        return lists
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
        guard foldsNames else { return (descriptor(in: index), name) }
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
        for fd in lazy.withLock({ $0.values }) { Sys.close(fd) }
        guard !isRoot, !foldsNames else { return }
        for fd in descriptors where fd >= 0 { Sys.close(fd) }
    }

    /// The directory's descriptor in layer `index`, -1 when it has none.
    subscript(index: Int) -> Int32 {
        slot(of: index).map { max(-1, descriptors[$0]) } ?? -1
    }

    /// The layers that have the directory, top first.
    let present: [Int]

    /// Those of `present` looked at through a descriptor or their own record rather than the
    /// view's map (see `NameMap`): the substitution and the main bundle where a map serves.
    let unmapped: [Int]

    /// Whether the top and bottom layers of the placement had the directory when it was opened
    /// (a concurrent change or one behind the daemon's back may have taken it away).
    var isComplete: Bool {
        has(Int(placement.top)) && has(Int(placement.bottom))
    }

    /// Where names fold: the entries of the directory in layer `index`, read for a listing
    /// (as `table`), are how that layer spells its names (its lookups need not read them
    /// again), unless the layer merges several directories here (each learnt as it was read).
    func learnSpellings(_ table: SpellingTable, in index: Int) {
        guard let dirs = directories(in: index), dirs.paths.count == 1 else { return }
        layers[index].spellings?.learn(table, in: dirs.paths[0])
    }

    /// The attributes of the directory in layer `index`; nil if it was not there when opened.
    /// A method, so that these descriptors stay alive (and open) during the call: a caller
    /// holding only a descriptor number may see the last reference go, and the number closed
    /// or reused, before it is used.
    func attributes(in index: Int) throws(Errno) -> stat? {
        let fd = descriptor(in: index)
        if fd >= 0 { return try Sys.fstat(fd) }
        return isIndexed(index) ? try layers[index].attributes(path) : nil
    }
}
