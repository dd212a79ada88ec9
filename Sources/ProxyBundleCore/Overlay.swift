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
    /// a rename that materializes a directory (Materialize.swift), both taken by the request
    /// (`Request.changing`, whose `Change` every function that changes the substitution
    /// takes): the kernel locks only the rename's parents, and a change beneath the directory
    /// made while its tree is copied would be lost with the tree the copy replaces (a removed
    /// directory came back on disk while the mount remembered it missing; StressTests found it).
    let changes = ReadWriteLock(rank: .changes)
    /// The merged entries of directories (Listing/).
    let lister: Lister
    /// Copy-up of entries and whole directories (CopyUp/).
    let copyUp: CopyUp
    /// The directories being materialized now, and how far each copy got.
    public var copiesInProgress: [LongCopy] { copyUp.inProgress }

    /// The view new requests pin now; for what is not a request (`.stats`, an invalidation).
    var current: StackView { views.current }

    /// The layers as they are now, top first (a request reads its own: `Request.layers`).
    public var currentLayers: LayerStack { current.layers }

    /// The patches of the current stack and of those it recently replaced, by the path each was
    /// opened at: a swap back to a patch of a few swaps ago takes it as it is, its index with it.
    public var recentPatches: [RawPath: Layer] { views.recentPatches }

    /// See `Views.keptPatches`.
    public func keptPatches(_ paths: [RawPath]) -> [Layer?] { views.keptPatches(paths) }

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

    /// Watches with inotify each directory the patches' indexes read from now on (`-o watch`,
    /// which must hear of changes by itself: called before the mount reads them). Otherwise
    /// `.invalidate` finds the patches' changes by their directories' change times (see
    /// `LayerWatch.watchesIndexes`).
    public func watchPatchDirectories() {
        views.watch.watchesIndexes = true
    }

    /// At a clean unmount: the substitution is left with nothing of the daemon's.
    public func close() {
        currentLayers.substitution?.close()
    }

    /// The directories the current patches' indexes hold, for `.stats` (see `LayerIndex`).
    public var indexedDirectories: Int {
        currentLayers.patches.reduce(0) { $0 + ($1.index?.count ?? 0) }
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

    func controlAttributes(_ control: ControlFile) -> stat {
        control.attributes(changed: views.changedAt)
    }
}

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
}
