#if canImport(Glibc)
import Glibc
#endif

/// The views of the layers (see `StackView`): the one new requests pin, the few it replaced
/// last, and the making of new ones when the layers change (an invalidation, a swap of the
/// patches or of the substitution, a remount). Requests take neither `installs` nor
/// `FuseServer.invalidations`: each reads only the view its `Request` pinned when it was made,
/// so a swap of the layers waits for no request.
///
/// The folder `Changes/` owns what happens when the layers change, through `.layers` or
/// behind the daemon's back: this type, watching (`LayerWatch`), marking what changed stale,
/// and invalidating.
final class Views: Sendable {
    /// The node table, whose placements every new view forgets (or keeps, for a swap that
    /// tells what changed).
    let nodes: NodeTable
    /// The directories looked into, watched for changes on disk (LayerWatch.swift).
    let watch = LayerWatch()
    /// Whether lookups are answered from the cache (`-o nocache` turns it off).
    let cachesLookups: Bool
    /// The substitution's path as given, to notice when it is swapped (nil: never reopened).
    let substitutionPath: RawPath?
    /// The view new requests pin: replaced whole (see `StackView`).
    private let currentView: Locked<StackView>
    /// The views last replaced by other layers (a swap), newest first: a file the kernel holds
    /// through a node resolved before the swap is still found there (see `Overlay.openWhereItWas`).
    private let recentViews = Locked<[StackView]>([], rank: .recentViews)
    static let keptViews = 4
    /// The most layers recent views may hold open beyond the current view's.
    static let keptLayers = 256
    /// How the layers of each of the last views published are numbered in the next one (nil:
    /// the same stack), oldest first, while the views are orders of the same layers: a file
    /// the kernel holds through a node resolved in a view no longer kept is still found, in the
    /// same layer (see `layer(numbered:in:)`). Two bytes a layer a view.
    private let numberings = Locked<[Numbering]>([], rank: .recentViews)
    struct Numbering {
        var generation: UInt32
        var next: UInt32
        var renumbered: [UInt16]?
    }
    static let keptNumberings = 64
    /// `recentPatches` as last made, and the view it was made in.
    private let recentPatchesByPath = Locked<(view: StackView, patches: [RawPath: Layer])?>(nil, rank: .recentViews)
    /// Whether a kept patch's path may name another directory by a mount (see `keptPatches`).
    let mountChanges = MountChanges()
    /// Serializes the making of new views (see `LockRank.installs`).
    let installs = Locked((), rank: .installs)
    /// What the last swaps between orders of the same patches kept for the next (see
    /// `SwapMemo`); emptied by every invalidation.
    let swapMemo = Locked(SwapMemo(), rank: .swapMemo)
    /// The last invalidation's time (the control files' times).
    private let controlTime: Locked<timespec>

    init(layers: LayerStack, nodes: NodeTable, substitutionPath: RawPath?, cachesLookups: Bool) {
        self.nodes = nodes
        self.cachesLookups = cachesLookups
        self.substitutionPath = substitutionPath
        var inodes = InodeNumbers(main: layers.main.device)
        inodes.register(layers)
        currentView = Locked(StackView(layers: layers, inodes: inodes, generation: nodes.generation,
                                       directories: DirectoryCache(watch: watch, nodes: nodes, knowsNames: cachesLookups)),
                             rank: .currentView)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        controlTime = Locked(now, rank: .controlTime)
    }

    /// The view new requests pin now.
    var current: StackView { currentView.withLock { $0 } }

    /// The views last replaced by other layers, newest first.
    var recent: [StackView] { recentViews.withLock { $0 } }

    /// The watch that patches' indexes are read with, nil where nothing is cached
    /// (`-o nocache`): see `LayerIndex`.
    var indexWatch: LayerWatch? { cachesLookups ? watch : nil }

    /// When the layers last changed (an invalidation or a swap): the control files' times.
    var changedAt: timespec { controlTime.withLock { $0 } }

    /// Makes changes go to the substitution again, or answer EROFS (a remount). EROFS for a
    /// stack without a substitution, which is never made writable.
    func setWritable(_ writable: Bool) throws(Errno) {
        try installs.withLock { _ throws(Errno) in
            guard let top = current.layers.substitution else {
                if writable { throw Errno.readOnly }
                return
            }
            top.setWritable(writable)
        }
    }

    /// Installs another substitution (after it was swapped on disk) and forgets everything
    /// cached: no kept inode numbers (they belonged to the old one's inodes). The old one is
    /// left without the daemon's work directory.
    func replaceSubstitution(_ layer: Layer, listingNames: Bool) throws(Errno) -> Overlay.Invalidation {
        let layers = current.layers
        let next = try layers.replacingSubstitution(Substitution(layer, writable: layers.substitution?.isWritable ?? false))
        return try install(next, listingNames: listingNames)
    }

    /// Puts `next` in place of the layers and forgets every placement: requests that start
    /// after this returns see `next`; those in flight finish in the view they began with. A
    /// substitution replaced is left without the daemon's work directory. Returns what the
    /// kernel must forget.
    func install(_ next: LayerStack, listingNames: Bool) throws(Errno) -> Overlay.Invalidation {
        try installs.withLock { _ throws(Errno) -> Overlay.Invalidation in
            let root = try next.rootPlacement(index: indexWatch)
            let old = current.layers.substitution
            let swapped = next.substitution !== old
            let touched = nodes.invalidate(subtree: nil, root: root, listingNames: listingNames)
            swapMemo.withLock { $0 = SwapMemo() }
            publishView(of: next)
            if swapped { old?.close() }
            watch.restart()
            touchControlTime()
            return Overlay.Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: swapped)
        }
    }

    /// Makes a view of `layers` in the node table's current generation the one new requests
    /// pin (with no directory descriptors yet; its file systems' inode tags those of the view
    /// before, plus any new ones). `carryingNames`: a swap between orders of the same patches
    /// that kept what stays, whose view takes the name maps of the one before (every other
    /// change maps its directories again, from records checked anew). Called with `installs`
    /// held.
    func publishView(of layers: LayerStack, carryingNames: Bool = false) {
        var inodes = current.inodes
        inodes.register(layers)
        let next = StackView(layers: layers, inodes: inodes, generation: nodes.generation,
                             directories: DirectoryCache(watch: watch, nodes: nodes, knowsNames: cachesLookups))
        let before = current
        let renumbered = Views.renumbering(from: before.layers, to: layers)
        if carryingNames, let renumbered {
            // the same layers in another order: what the view knew of which patches hold
            // what stays true (the records are the same), renumbered where next used
            next.directories.carry(before.directories, renumbered: renumbered)
        }
        numberings.withLock { chain in
            guard before.layers === layers || renumbered != nil else { return chain.removeAll() }
            if chain.count == Views.keptNumberings { chain.removeFirst() }
            chain.append(Numbering(generation: before.generation.number, next: next.generation.number,
                                   renumbered: before.layers === layers ? nil : renumbered))
        }
        let old = currentView.withLock { current -> StackView in
            defer { current = next }
            return current
        }
        // its directories close once no request in flight holds them
        old.directories.removeAll()
        // a view of other layers stays among the recent ones (see `Overlay.openWhereItWas`),
        // its layers open; the layers only recent views hold are a few hundred at most
        guard old.layers !== layers else { return }
        let current = Set(layers.layers.map(ObjectIdentifier.init))
        let reorders = old.layers.count == layers.count && old.layers.layers.allSatisfy { current.contains(ObjectIdentifier($0)) }
        let dropped = recentViews.withLock { views -> [StackView] in
            views.insert(old, at: 0)
            var kept = 0
            var held = Set<ObjectIdentifier>()
            for view in views.prefix(Views.keptViews) {
                held.formUnion(view.layers.layers.lazy.map(ObjectIdentifier.init).filter { !current.contains($0) })
                guard held.count <= Views.keptLayers else { break }
                kept += 1
            }
            defer { views.removeLast(views.count - kept) }
            return Array(views[kept...])
        }
        // the same layers in another order, and none but them let go: the patches by path
        // stay as they were (a swap between orders of 1,000 patches makes no map of them)
        if reorders && dropped.allSatisfy({ $0.layers.layers.allSatisfy { current.contains(ObjectIdentifier($0)) } }) {
            recentPatchesByPath.withLock { known in
                if let patches = known?.patches, known?.view === old { known = (next, patches) }
            }
        }
        _ = dropped  // let go outside the lock
    }

    /// Each layer's number in `new` by its number in `old`, where `new` is another stack of
    /// the same layers (nil otherwise, and for the same stack: an invalidation).
    static func renumbering(from old: LayerStack, to new: LayerStack) -> [UInt16]? {
        guard old !== new, old.count == new.count else { return nil }
        let numbers = Dictionary(new.layers.indices.map { (ObjectIdentifier(new[$0]), UInt16($0)) }, uniquingKeysWith: { a, _ in a })
        guard numbers.count == new.count else { return nil }
        var renumbered: [UInt16] = []
        renumbered.reserveCapacity(old.count)
        for layer in old.layers {
            guard let number = numbers[ObjectIdentifier(layer)] else { return nil }
            renumbered.append(number)
        }
        return renumbered
    }

    /// The layer numbered `top` in the view of generation `generation`: in that view if it is
    /// still kept, else the same layer in the current view where every view since was an order
    /// of the same layers (see `numberings`). Nil when it is known nowhere.
    func layer(numbered top: UInt16, in generation: UInt32) -> Layer? {
        let kept = [current] + recent
        var number = Int(top), at = generation
        if kept.first(where: { $0.generation.number == at }) == nil {
            for step in numberings.withLock({ $0 }) {
                guard step.generation == at else { continue }
                if let renumbered = step.renumbered {
                    guard number < renumbered.count else { return nil }
                    number = Int(renumbered[number])
                }
                at = step.next
            }
        }
        guard let view = kept.first(where: { $0.generation.number == at }), number < view.layers.count else { return nil }
        return view.layers[number]
    }

    func touchControlTime() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        controlTime.withLock { $0 = now }
    }

    /// The patches of the current stack and of those it recently replaced, by the path each was
    /// opened at: a swap back to a patch of a few swaps ago takes it as it is, its index with it.
    var recentPatches: [RawPath: Layer] {
        let current = self.current
        if let known = recentPatchesByPath.withLock({ $0 }), known.view === current { return known.patches }
        let stacks = [current.layers] + recent.map(\.layers)
        var found: [RawPath: Layer] = [:]
        for stack in stacks {
            for patch in stack.patches where found[patch.path] == nil { found[patch.path] = patch }
        }
        let replaced = recentPatchesByPath.withLock { known in
            defer { known = (current, found) }
            return known
        }
        _ = replaced  // let go outside the lock (a view's last holder closes its directories)
        return found
    }

    /// The layers whose descriptors the daemon holds open: the current view's, and those that
    /// only the recent views still hold (see `publishView`).
    var openLayerCount: Int {
        var held = Set(current.layers.layers.map(ObjectIdentifier.init))
        for view in recent { held.formUnion(view.layers.layers.map(ObjectIdentifier.init)) }
        return held.count
    }
}
