#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The merged view of a stack of layers (see `LayerStack`): the substitution on top, the only
/// layer written, then the patches, then the main bundle. Operations are named after the FUSE
/// requests that use them and take kernel node IDs; nothing here imports libfuse. Each takes
/// the `Request` it serves first: the view it reads, who asks, whether the caller gave up.
///
/// The front that the FUSE server, the control files and the command line call: it holds the
/// parts, each owning its state: the node table (Nodes/), `Views` (the layers' views and
/// their changes, Changes/), `Resolver` (Lookup/), `Lister` (Listing/) and `CopyUp` (CopyUp/).
/// It runs the operations itself (Operations/, a file per operation).
///
/// Every lock of the daemon has a rank, declared with it (`LockRank`, which writes the order
/// down and says what each guards); debug builds check the order on every acquisition.
public final class Overlay: Sendable {
    let nodes: NodeTable
    /// The views of the layers, and their changes (Changes/).
    let views: Views
    /// Which layer serves a name, and where a node is now (Lookup/).
    let resolver: Resolver
    /// Whether lookups are answered from the cache (`-o nocache` turns it off).
    public let cachesLookups: Bool
    /// Whether changes go to the substitution now (false: they answer EROFS, as always
    /// without one); changed by a remount. A request asks its own view (`Request.isWritable`).
    public var isWritable: Bool { current.layers.substitution?.isWritable ?? false }
    /// Held shared by every change of the substitution made through the mount, and alone by
    /// a rename that materializes a directory (Materialize.swift): the kernel locks only the
    /// rename's parents, and a change beneath the directory made while its tree is copied
    /// would be lost with the tree the copy replaces (a removed directory came back on disk
    /// while the mount remembered it missing; StressTests found it).
    let changes = ReadWriteLock(rank: .changes)
    /// The merged entries of directories (Listing/).
    let lister: Lister
    /// Copy-up of entries and whole directories (CopyUp/).
    let copyUp: CopyUp
    /// The directories being materialized now, and how far each copy got.
    public var copiesInProgress: [LongCopy] { copyUp.inProgress }

    /// The view new requests pin now; for what is not a request (`.stats`, an invalidation).
    var current: StackView { views.current }

    /// Holds `changes` shared until the matching `endChange`: every public operation that
    /// changes the substitution runs wholly between the two.
    func beginChange() { changes.lockShared() }
    func endChange() { changes.unlockShared() }

    /// The layers as they are now, top first (a request reads its own: `Request.layers`).
    public var currentLayers: LayerStack { current.layers }

    /// The patches of the current stack and of those it recently replaced, by the path each was
    /// opened at: a swap back to a patch of a few swaps ago takes it as it is, its index with it.
    public var recentPatches: [RawPath: Layer] { views.recentPatches }

    /// Told of what goes wrong outside any one request (a substitution removed behind the
    /// daemon's back), once each time.
    let warn: @Sendable (String) -> Void
    /// What a lookup answers: the node and its attributes as the mount reports them.
    public struct Entry: Sendable {
        public var node: NodeID
        public var attributes: stat
    }

    /// Changes go to the stack's substitution while it is writable; otherwise, and without
    /// one, they answer EROFS. With `substitutionPath`, an invalidation reopens the
    /// substitution when that path has come to name another directory.
    public init(layers: LayerStack, substitutionPath: RawPath? = nil,
                cachesLookups: Bool = true, warn: @escaping @Sendable (String) -> Void = { _ in }) throws(Errno) {
        self.cachesLookups = cachesLookups
        self.warn = warn
        nodes = NodeTable(root: try layers.rootPlacement(), foldsNames: layers.foldsNames)
        views = Views(layers: layers, nodes: nodes, substitutionPath: layers.substitution == nil ? nil : substitutionPath,
                      cachesLookups: cachesLookups)
        resolver = Resolver(nodes: nodes, indexWatch: views.indexWatch)
        lister = Lister(indexWatch: views.indexWatch)
        copyUp = CopyUp(nodes: nodes, resolver: resolver, lister: lister, warn: warn)
    }

    /// The overlay of `main` under `patches` (the first wins) under `substitution` (none: a
    /// read-only stack that writes nothing anywhere).
    public convenience init(main: Layer, patches: [Layer] = [], substitution: Layer?, writable: Bool = false,
                            substitutionPath: RawPath? = nil, cachesLookups: Bool = true,
                            warn: @escaping @Sendable (String) -> Void = { _ in }) throws(Errno) {
        let top = substitution.map { Substitution($0, writable: writable) }
        try self.init(layers: LayerStack(substitution: top, patches: patches, main: main),
                      substitutionPath: substitutionPath, cachesLookups: cachesLookups, warn: warn)
    }

    /// Makes changes go to the substitution again, or answer EROFS (a remount). EROFS for a
    /// stack without a substitution, which is never made writable.
    public func setWritable(_ writable: Bool) throws(Errno) {
        try views.setWritable(writable)
    }

    /// Forgets the cached view of the whole tree, or of `subtree` (see `Views.invalidate`);
    /// returns what the kernel must forget. `listingNames: false` leaves `entries` empty
    /// (when the kernel can expire every name at once).
    public func invalidate(subtree: [UInt8]? = nil, listingNames: Bool = true) throws(Errno) -> Invalidation {
        try views.invalidate(subtree: subtree, listingNames: listingNames)
    }

    /// Waits until changes on disk have settled (see `Views.waitForSettledChanges`); whether
    /// there are changes to invalidate (`-o watch`).
    public func waitForSettledChanges(idle: Int32, quiet: Int32, longest: Int32) -> Bool {
        views.waitForSettledChanges(idle: idle, quiet: quiet, longest: longest)
    }

    /// At a clean unmount: the substitution is left with nothing of the daemon's.
    public func close() {
        currentLayers.substitution?.close()
    }

    /// The layers whose descriptors the daemon holds open, for `.stats` (see `Views`).
    public var openLayerCount: Int { views.openLayerCount }

    /// The number of nodes the kernel currently holds references to (the root included).
    public var nodeCount: Int { nodes.count }

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

    // MARK: lookup and attributes

    /// Resolves `name` in `parent`, from the cache when it knows the answer.
    public func lookup(_ request: Request, parent: NodeID, name: [UInt8]) throws(Errno) -> Entry {
        switch try find(request, name, in: parent) {
        case .found(let entry): return entry
        case .absent: throw Errno.noEntry
        }
    }

    /// What `find` answers.
    public enum Found {
        case found(Entry)
        /// Missing; `remembered` tells whether the cache keeps that answer (so an
        /// invalidation can name it to the kernel).
        case absent(remembered: Bool)
    }

    /// A readdirplus entry: the lookup of `item` of `listing`.
    public func lookup(_ request: Request, listed item: DirectoryListing.Item, in listing: DirectoryListing) throws(Errno) -> Entry {
        switch try find(request, listing.name(item), in: listing.node, listed: (item, listing)) {
        case .found(let entry): return entry
        case .absent: throw Errno.noEntry
        }
    }

    /// Resolves `name` in `parent`, from the cache when it knows the answer. A name of a
    /// directory `listed` while no name changed since is looked for only where the listing
    /// found it.
    public func find(_ request: Request, _ name: [UInt8], in parent: NodeID,
                     listed: (item: DirectoryListing.Item, listing: DirectoryListing)? = nil) throws(Errno) -> Found {
        try Names.checkLookup(name)
        if let control = ControlFile(name: name, in: parent) {
            return .found(Entry(node: control.node, attributes: controlAttributes(control)))
        }
        switch cachesLookups ? nodes.cachedLookup(parent: parent, name: name, in: request.view.generation) : .unknown {
        case .absent:
            return .absent(remembered: true)
        case .found(let id, let location):
            let st = try? request.attributes(at: location.path, location.placement)
            if let st, NodeTable.kind(of: st.st_mode) == location.kind {
                return .found(Entry(node: id, attributes: st))
            }
            nodes.forget(id, count: 1)  // gone or changed on disk: resolve it again
        case .unknown:
            break
        }
        let resolvedAt = nodes.version
        do throws(Errno) {
            let found: Resolved
            if let listed, cachesLookups, listed.listing.version == resolvedAt {
                found = try resolver.resolve(request, listed: listed.item, of: listed.listing)
            } else {
                found = try resolver.resolve(request, name, in: try resolver.descriptors(request, of: parent, located: resolvedAt))
            }
            let id = nodes.remember(parent: parent, name: name, placement: found.placement,
                                    kind: NodeTable.kind(of: found.attributes.st_mode),
                                    identity: UInt64(found.attributes.st_ino), linkCount: Int(found.attributes.st_nlink),
                                    resolvedAt: resolvedAt, in: request.view.generation)
            return .found(Entry(node: id, attributes: found.attributes))
        } catch let error where error.code == ENOENT {
            nodes.dropForgotten(parent: parent, name: name, resolvedAt: resolvedAt)
            let remembered = cachesLookups && nodes.rememberAbsent(parent: parent, name: name, resolvedAt: resolvedAt,
                                                                          in: request.view.generation)
            return .absent(remembered: remembered)
        }
    }

    public func forget(_ node: NodeID, count: UInt64) {
        nodes.forget(node, count: count)
    }

    public func attributes(_ request: Request, of node: NodeID) throws(Errno) -> stat {
        if let control = ControlFile(node: node) { return controlAttributes(control) }
        if let st = nodes.openFileAttributes(of: node, detachedOnly: true) { return request.shown(st) }
        do throws(Errno) {
            let location = try resolver.locate(request, node)
            let st = try attributes(request, of: node, at: location)
            guard location.kind == 0 || NodeTable.kind(of: st.st_mode) == location.kind else {
                // another kind of entry took the name (the kernel would mark the inode bad)
                if let st = nodes.openFileAttributes(of: node, detachedOnly: false) { return request.shown(st) }
                throw Errno.stale
            }
            return st
        } catch let error where error.code == ESTALE {
            // its name now leads elsewhere (found just now by `locate`), but it may still be open,
            // or still be where it was before the layers were swapped
            if let st = nodes.openFileAttributes(of: node, detachedOnly: true) { return request.shown(st) }
            guard let before = nodes.lastKnownLocation(of: node, in: request.view.generation),
                  let (fd, st) = openWhereItWas(request, before, flags: pb_O_PATH) else { throw error }
            Sys.close(fd)
            return request.shown(st)
        }
    }

    /// A directory's attributes come through the descriptor kept for its lookups when there is
    /// one (a read, like a lookup: see `DirectoryCache`), everything else's by path.
    private func attributes(_ request: Request, of node: NodeID, at location: NodeTable.Location) throws(Errno) -> stat {
        let placement = location.placement
        if cachesLookups, placement.isDirectory, let dirs = request.directories.cached(node, placement),
           let st = try dirs.attributes(in: Int(placement.top)) {
            return request.shown(st, placement)
        }
        return try request.attributes(at: location.path, placement)
    }

    public func readLink(_ request: Request, _ node: NodeID) throws(Errno) -> [UInt8] {
        if ControlFile(node: node) != nil { throw Errno.invalid }
        let location = try resolver.locate(request, node)
        return try request.layer(serving: location.placement).readLink(location.path)
    }

    // MARK: files

    /// A file opened by `openFile`: the descriptor (the caller owns it) and which file of
    /// its layer it is.
    public struct OpenedFile: Sendable {
        public var fd: Int32
        public var device: UInt64
        public var inode: UInt64
    }

    /// Opens the file behind `node`. Opening a main-bundle file for writing (or with O_TRUNC)
    /// copies it up first.
    public func openFile(_ request: Request, _ node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
        if let opened = try openRemovedFile(request, node, flags: flags) { return opened }
        var location: NodeTable.Location
        do {
            location = try resolver.locate(request, node)
        } catch let error where error.code == ESTALE {
            // the layers were swapped since the kernel looked the name up, and the name leads
            // to another file now: the file the kernel holds is still served, for reading
            guard flags & O_ACCMODE == O_RDONLY, flags & O_TRUNC == 0,
                  let before = nodes.lastKnownLocation(of: node, in: request.view.generation),
                  let (fd, st) = openWhereItWas(request, before, flags: flags & pb_O_PASSED) else { throw error }
            nodes.opened(node, fd: fd)
            return OpenedFile(fd: fd, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        }
        if location.placement.isDirectory { throw Errno.isDirectory }
        let writes = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
        if writes && !location.placement.inSubstitution {
            beginChange(); defer { endChange() }
            try copyUp.copyUp(request, node, withData: flags & O_TRUNC == 0)
            location = try resolver.locate(request, node)
        }
        if writes { try request.checkWritable(warn: warn) }
        let fd = try request.layer(serving: location.placement).open(location.path, flags: flags & pb_O_PASSED)
        // a rename may have put a directory at the path since the kernel's lookup (a symlink
        // fails to open): its attributes for this inode would make the kernel mark the inode
        // bad (EIO); ESTALE makes the kernel look the name up again instead
        guard let st = try? Sys.fstat(fd), location.kind == 0 || NodeTable.kind(of: st.st_mode) == location.kind else {
            Sys.close(fd)
            throw Errno.stale
        }
        nodes.opened(node, fd: fd)
        return OpenedFile(fd: fd, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Opens `node`'s file with `flags` where it still is after the layers were swapped (only
    /// then): at
    /// its path in the layer that served it, in the view it was last resolved in if that is
    /// among the recent ones, else in this request's view and the recent ones at the same
    /// layer number (a patch is never changed through the mount). Only the very file the node
    /// is (its identity) is found. Nil when it is found nowhere.
    private func openWhereItWas(_ request: Request, _ location: NodeTable.Location, flags: Int32) -> (fd: Int32, attributes: stat)? {
        guard !location.placement.isDirectory, location.identity != 0, location.resolvedIn != 0 else { return nil }
        let recent = views.recent
        // only across a swap of the layers since the node was resolved: a name hidden or
        // removed in the same layers leads nowhere, as on any file system
        guard recent.contains(where: { $0.generation.number >= location.resolvedIn }) else { return nil }
        let views = recent.filter { $0.generation.number == location.resolvedIn } + [request.view] + recent
        var tried = Set<ObjectIdentifier>()
        for candidate in views where Int(location.placement.top) < candidate.layers.count {
            let layer = candidate.layers[Int(location.placement.top)]
            guard tried.insert(ObjectIdentifier(layer)).inserted, let fd = try? layer.open(location.path, flags: flags) else {
                continue
            }
            if let st = try? Sys.fstat(fd), NodeTable.kind(of: st.st_mode) == location.kind,
               UInt64(request.shown(st).st_ino) == location.identity {
                return (fd, st)
            }
            Sys.close(fd)
        }
        return nil
    }

    /// The kernel's inode of `node` cannot serve the file its name leads to now: the name is
    /// taken away from the node, so that after an ESTALE the kernel looks it up again and gets
    /// a new node (and inode).
    public func detachName(of node: NodeID) {
        nodes.detachName(of: node)
    }

    /// The kernel closed its last use of `fd`, opened by `openFile` or `create` for `node`.
    public func release(_ node: NodeID, fd: Int32) {
        if !nodes.closed(node, fd: fd) { Sys.close(fd) }
    }

    /// The attributes of an open file, through its descriptor (also after its name was removed).
    public func attributes(_ request: Request, of node: NodeID, openFile fd: Int32) throws(Errno) -> stat {
        if let control = ControlFile(node: node) { return controlAttributes(control) }
        return request.shown(try Sys.fstat(fd))
    }

    // MARK: file system

    /// The top layer's file system (the substitution's when there is one), as kernel overlayfs
    /// reports its upper one, or its first lower one without an upper: names of up
    /// to its limit work in every operation (a whiteout for a name too long for `.wh.` is a
    /// device, see `Whiteout.needsDevice`), never more than 255 bytes.
    public func fileSystemStatistics(_ request: Request) throws(Errno) -> statvfs {
        var result = try request.layers[0].fileSystemStatistics()
        result.f_namemax = min(result.f_namemax, UInt(Names.maximumLength))
        return result
    }

    /// access(2): checks `mask` against the node's mode for the request's caller.
    public func checkAccess(_ request: Request, _ node: NodeID, mask: Int32) throws(Errno) {
        let st = try attributes(request, of: node)
        try Permissions.check(st, mask: mask, user: request.caller)
    }

    func controlAttributes(_ control: ControlFile) -> stat {
        control.attributes(changed: views.changedAt)
    }
}

extension Request {
    /// The layer that serves an entry placed so (its top layer), in this request's view.
    func layer(serving placement: Placement) -> Layer {
        layers[Int(placement.top)]
    }

    /// The attributes of the entry at `path` placed so, as the mount shows them.
    func attributes(at path: LayerPath, _ placement: Placement) throws(Errno) -> stat {
        shown(try layer(serving: placement).attributes(path), placement)
    }

    /// The copy-up work directory, made (again) if it is missing: an updater may have removed
    /// it (`rsync --delete`) or moved it.
    func workspace(warn: (String) -> Void) throws(Errno) -> Workspace {
        try checkWritable(warn: warn)
        guard let top = layers.substitution else { throw Errno.readOnly }
        return try top.workspace()
    }

    /// EROFS for a read-only overlay, one without a substitution, and while the substitution
    /// directory is removed (see `Substitution.checkWritable`, which tells `warn` once).
    func checkWritable(warn: (String) -> Void) throws(Errno) {
        guard let top = layers.substitution else { throw Errno.readOnly }
        try top.checkWritable(warn: warn)
    }
}
