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
        let fd = self[index]
        return fd >= 0 ? try Sys.fstat(fd) : nil
    }
}
