#if canImport(Glibc)
import Glibc
#endif

/// Freshness: what the daemon has cached may be outdated by changes made on disk behind its
/// back. `invalidate` marks it stale; stale nodes are resolved again when next used.
extension Overlay {
    /// What an invalidation touched, for flushing the kernel's caches too.
    public struct Invalidation: Sendable {
        /// Names (positive and negative) the kernel may have cached.
        public var entries: [(parent: NodeID, name: [UInt8])]
        /// Nodes whose attributes and pages the kernel may have cached.
        public var nodes: [NodeID]
        /// Whether the substitution's path named another directory, now in use.
        public var swappedSubstitution: Bool
        /// Whether `entries` are exactly the names that changed (LayerWatch saw every change):
        /// every other name stays cached, so they must be dropped one by one.
        public var exact = false
    }

    /// Forgets the cached view of the whole tree, or of `subtree` (a relative path: the names
    /// along it and everything beneath it). Reopens the substitution first if its path now
    /// names another directory (then the whole tree is invalidated).
    /// `listingNames: false` leaves `entries` empty (when the kernel can expire every name at once).
    public func invalidate(subtree: [UInt8]? = nil, listingNames: Bool = true) throws(Errno) -> Invalidation {
        if let swapped = try substitutionSwappedOnDisk() {
            return try replaceSubstitution(swapped, listingNames: listingNames)
        }
        let names = try subtree.flatMap(Overlay.pathNames)
        return try installs.withLock { _ throws(Errno) -> Invalidation in
            let current = currentView.withLock { $0 }
            current.layers.forgetSpellings()
            swapMemo.withLock { $0 = SwapMemo() }
            let root = try current.layers.rootPlacement(index: indexWatch)
            defer { touchControlTime() }
            if subtree == nil, nodes.placement(of: rootNodeID) == root, let (seen, indexed) = watch.changes() {
                let changes = seen + nodeChanges(indexed)
                let (touched, replaced) = nodes.invalidate(changes: changes, watched: watch.watchedPlacements)
                watch.unwatch(replaced)
                current.directories.removeAll()
                return Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false, exact: true)
            }
            if let names {
                // a layer's index reads the path again (everything: `restart` below)
                let path = LayerPath(bytes: Array(names.joined(separator: [UInt8(ascii: "/")])))
                for layer in current.layers.layers { layer.index?.forget(subtree: path) }
            }
            let before = nodes.generation.number
            let touched = nodes.invalidate(subtree: names, root: root, listingNames: listingNames)
            // every placement forgotten (a new generation): requests from now on pin a new view
            if nodes.generation.number != before {
                publishView(of: current.layers)
            } else {
                current.directories.removeAll()
            }
            if names == nil { watch.restart() }  // everything is resolved again, and watched anew
            return Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false)
        }
    }

    /// The changes seen in directories of patches' indexes, told to the indexes, as changes of
    /// the directory nodes at the same paths (a patch is not changed through the mount, so a
    /// path in it is the view's): a whiteout or the opaque marker as in `LayerWatch.parse`.
    private func nodeChanges(_ indexed: [LayerWatch.IndexedChange]) -> [LayerWatch.Change] {
        var changes: [LayerWatch.Change] = []
        for change in indexed {
            change.index.changed(change.path, name: change.name, isDirectory: change.isDirectory,
                                 structural: change.structural)
            guard let directory = nodes.directoryNode(at: change.path) else { continue }
            if change.name == Whiteout.opaqueMarker {
                changes.append(LayerWatch.Change(directory: directory, name: [], structural: true))
            } else if change.name.starts(with: Whiteout.reservedPrefix) {
                continue
            } else if let hidden = Whiteout.hiddenName(change.name) {
                changes.append(LayerWatch.Change(directory: directory, name: hidden, structural: true))
            } else {
                changes.append(LayerWatch.Change(directory: directory, name: change.name, structural: true))
            }
        }
        return changes
    }

    /// Waits until changes in the layers' directories the daemon uses have settled (no new
    /// change for `quiet` milliseconds, or `longest` after the first), or `idle` milliseconds
    /// without any; whether there are changes to invalidate (`-o watch`).
    public func waitForSettledChanges(idle: Int32, quiet: Int32, longest: Int32) -> Bool {
        guard watch.waitForChanges(milliseconds: idle) else { return false }
        var seen = watch.pendingBytes()
        var waited: Int32 = 0
        while waited < longest {
            usleep(useconds_t(quiet) * 1000)
            waited += quiet
            let now = watch.pendingBytes()
            if now == seen { break }
            seen = now
        }
        return true
    }

    /// The names of a relative path as written to `.invalidate`; nil for the whole tree.
    static func pathNames(_ text: [UInt8]) throws(Errno) -> [[UInt8]]? {
        let names = text.split(separator: UInt8(ascii: "/")).map(Array.init).filter { $0 != [0x2E] }
        if names.isEmpty { return nil }
        for name in names { try Names.checkLookup(name) }
        return names
    }

    /// The directory at the substitution's path, opened, if it is no longer the one in use
    /// (swapped by rename, or removed and made anew); nil while the path names none.
    private func substitutionSwappedOnDisk() throws(Errno) -> Layer? {
        guard let path = substitutionPath else { return nil }
        var onDisk = stat()
        guard path.withCString({ stat($0, &onDisk) }) == 0 else { return nil }  // gone for now: keep serving the one we have
        guard let substitution = currentLayers.substitution?.layer else { return nil }
        let open = try Sys.fstat(substitution.rootFD)
        if onDisk.st_dev == open.st_dev && onDisk.st_ino == open.st_ino { return nil }
        return try Layer(path: path, accessTimes: substitution.accessTimes, foldsNames: substitution.spellings != nil)
    }

    /// A node's location in this request's view, resolving again whatever is stale along
    /// its path. ESTALE when its name no longer leads to the same kind of entry (or the same
    /// file); EPERM for a control file.
    func locate(_ request: Request, _ id: NodeID) throws(Errno) -> NodeTable.Location {
        if ControlFile(node: id) != nil { throw Errno.notPermitted }
        let generation = request.view.generation
        let location = try nodes.location(of: id, in: generation)
        if location.isFresh { return location }
        return try refresh(request, id, in: generation)
    }

    /// Resolves `id` again where it is stale, its ancestors first, and returns its location as
    /// resolved: the table keeps it only when `generation` is still the table's (a request
    /// that began before a swap uses what it resolved, and stores nothing).
    private func refresh(_ request: Request, _ id: NodeID, in generation: NodeTable.Generation) throws(Errno) -> NodeTable.Location {
        guard id != rootNodeID else { return try nodes.location(of: id, in: generation) }
        guard let (parent, name, fresh) = nodes.nameOf(id, in: generation), parent != NodeTable.detachedParent else {
            throw Errno.stale
        }
        let dir = try refreshed(request, parent, in: generation)
        if fresh, case let location = try nodes.location(of: id, in: generation), location.isFresh { return location }
        let found: Resolved
        do {
            found = try resolve(request, name, in: dir.path, dir.placement)
        } catch let error where error.code == ENOENT || error.code == ENOTDIR {
            nodes.detachName(of: id)
            throw Errno.stale
        }
        let kind = NodeTable.kind(of: found.attributes.st_mode)
        nodes.refresh(id, placement: found.placement, kind: kind, identity: UInt64(found.attributes.st_ino), in: generation)
        var location = try nodes.location(of: id, in: generation)
        if !location.isFresh {
            // not kept (another generation, or its ancestors went stale again meanwhile): what
            // was resolved just now serves this request
            guard location.kind == 0 || location.kind == kind else {
                throw Errno.stale
            }
            location.placement = found.placement
        }
        return location
    }

    /// The location of directory `id` for resolving its children: refreshed when stale.
    private func refreshed(_ request: Request, _ id: NodeID, in generation: NodeTable.Generation) throws(Errno) -> NodeTable.Location {
        let location = try nodes.location(of: id, in: generation)
        return location.isFresh ? location : try refresh(request, id, in: generation)
    }

    /// The figures `.stats` reports.
    public struct CacheStatistics: Sendable {
        /// Nodes the kernel holds.
        public var nodes: Int
        /// Nodes it forgot whose files still have a name, kept for their file handles.
        public var forgottenNodes: Int
        public var absentNames: Int
        public var hits: UInt64
        public var misses: UInt64
    }

    public var cacheStatistics: CacheStatistics {
        let s = nodes.statistics
        return CacheStatistics(nodes: s.nodes, forgottenNodes: s.forgotten, absentNames: s.absent, hits: s.hits, misses: s.misses)
    }
}

extension Overlay {
    /// Where names fold, each spelling of a directory the kernel looks up is a node of its own
    /// (see docs/DESIGN.md), so a change made through one spelling of a path leaves the nodes
    /// of the others behind (a directory copied up through `DATA` is still below the
    /// substitution for `Data`). After every change, every node is therefore resolved again at
    /// its next use, and the directories' descriptors are dropped: one pass over the node table
    /// per change, and nothing at all without folding. The kernel is told to forget what it
    /// keeps of the other spellings of the directories `changed` (their attributes and
    /// listings), and the names `made` (no longer missing in any spelling) and `gone` (whose
    /// other spellings, other names of one node, no longer lead to it) name: the request keeps
    /// them until its reply (the change holds its locks now).
    func forgetOtherSpellings(_ request: Request, changed: [NodeID] = [], made: [(parent: NodeID, name: [UInt8])] = [],
                              gone: [(parent: NodeID, name: [UInt8])] = []) {
        guard request.layers.foldsNames else { return }
        var names: [NodeTable.ChildKey] = []
        for (parent, name) in made { names += nodes.takeAbsentSpellings(of: name, in: parent) }
        for (parent, name) in gone { names += nodes.takeOtherSpellings(of: name, in: parent, keeping: made.first) }
        nodes.markStale(under: rootNodeID)
        request.directories.removeAll()
        // what the substitution holds changed: its spellings are read again
        request.layers.substitution?.layer.spellings?.forget()
        let others = changed.flatMap(nodes.otherSpellings)
        guard !others.isEmpty || !names.isEmpty else { return }
        request.keep(forgetting: others, names: names.map { ($0.parent, $0.name) })
    }

}
