#if canImport(Glibc)
import Glibc
#endif

/// What a swap of the patches changes in what the mount has cached, told from the patches'
/// indexes alone (see `LayerIndex`): for each directory with cached names, each name a patch
/// of either stack holds there (an entry or a whiteout file) resolves as kernel overlayfs
/// would in the old stack and in the new; where both give the same (the same patch serving,
/// merging the same patches of a directory, hiding or not what lies below), its node stays and
/// is renumbered, and its directory is looked into in turn; where not, the name (and what lies
/// beneath it) is resolved again and the kernel told. Names no patch holds resolve as before.
/// A swap between the same patches in another order reads nothing from disk (each index read
/// what the cached directories hold when they were looked into).
struct PatchSwap {
    let old: LayerStack
    let new: LayerStack
    let watch: LayerWatch
    let cached: NodeTable.SwapSnapshot
    /// Each layer's number in the new stack, and in the old, by the layer.
    private let numbers: [ObjectIdentifier: Int]
    private let oldNumbers: [ObjectIdentifier: Int32]

    var decided: [NodeID: NodeTable.SwapDecision] = [:]
    var changedNames: [NodeTable.ChildKey] = []
    /// Directories whose listing changed.
    var listings: Set<NodeID> = []
    /// Directories (changed themselves) whose cached names beneath all go.
    var changedTrees: Set<NodeID> = []

    /// Whether the new stack has the same patches as the old, in another order.
    let reordersOnly: Bool
    /// What a swap between orders of these patches keeps (see `SwapMemo`).
    var memo: SwapMemo

    init(old: LayerStack, new: LayerStack, watch: LayerWatch, cached: NodeTable.SwapSnapshot, memo: SwapMemo) {
        self.old = old
        self.new = new
        self.watch = watch
        self.cached = cached
        let patches = Set(old.patches.map(ObjectIdentifier.init))
        reordersOnly = patches == Set(new.patches.map(ObjectIdentifier.init))
        self.memo = memo.patches == patches ? memo : SwapMemo(patches: patches)
        numbers = Dictionary(new.layers.indices.map { (ObjectIdentifier(new.layers[$0]), $0) }, uniquingKeysWith: { a, _ in a })
        oldNumbers = Dictionary(old.layers.indices.map { (ObjectIdentifier(old.layers[$0]), Int32($0)) },
                                uniquingKeysWith: { a, _ in a })
    }

    /// Whether the swap can be told from indexes: every patch of both stacks has one.
    static func applies(from old: LayerStack, to new: LayerStack) -> Bool {
        !old.foldsNames && old.patches.allSatisfy { $0.index != nil } && new.patches.allSatisfy { $0.index != nil }
    }

    /// The patches the root merges in `stack` (placed `root`), top first.
    static func rootPatches(_ stack: LayerStack, _ root: Placement) -> [Layer] {
        let first = stack.substitution == nil ? 0 : 1
        return stack.layers.indices.filter { $0 >= first && $0 < stack.mainIndex && root.layers.contains($0) }.map { stack[$0] }
    }

    /// Goes through the cached names beneath the root (placed `oldRoot` and `newRoot`).
    mutating func run(oldRoot: Placement, newRoot: Placement) throws(Errno) -> Bool {
        let before = PatchSwap.rootPatches(old, oldRoot), after = PatchSwap.rootPatches(new, newRoot)
        // the root merges the same patches, and the main bundle in both or neither
        guard Set(before.map(ObjectIdentifier.init)) == Set(after.map(ObjectIdentifier.init)),
              (Int(oldRoot.bottom) == old.mainIndex) == (Int(newRoot.bottom) == new.mainIndex) else { return false }
        try visit(rootNodeID, .root, before, after)
        return true
    }

    /// How a name resolves among the patches (see `Resolver.resolve`): the patch serving it,
    /// the patches a directory merges (in order), and whether what lies below the patches (the
    /// main bundle) is hidden.
    /// Patches are named by their numbers in the old stack.
    private struct Resolution: Equatable {
        var top: Int32?
        var isDirectory = false
        var merged: [Int32] = []
        var hidesBelow = false

        /// The same answer, whatever the order the directory's patches merge in; a directory
        /// whose first patch changed is the same directory, shown with that patch's attributes.
        func resolvesLike(_ other: Resolution) -> Bool {
            guard isDirectory == other.isDirectory, hidesBelow == other.hidesBelow else { return false }
            guard isDirectory else { return top == other.top }
            return merged.count == other.merged.count && merged.sorted() == other.merged.sorted()
        }

        static func == (a: Resolution, b: Resolution) -> Bool { a.resolvesLike(b) }
    }

    /// Directories whose attributes now come from another patch (its first in the new order).
    var attributesChanged: Set<NodeID> = []

    /// What one patch holds under a name in a directory: its entry's `d_type` (or
    /// `LayerIndex.whiteoutType`), whether it has a whiteout file for the name, and whether
    /// its directory of that name is opaque.
    private struct Holder {
        /// The patch's number in the old stack, and in the new.
        var old: Int32
        var new: Int32 = 0
        var type: UInt8?
        var whiteout = false
        var opaque = false
    }

    /// Looks at the cached names of directory node `dir` at `path`, which merges the patches
    /// `before` in the old stack and the same patches `after` in the new. One pass over their
    /// records finds, for each name, the patches that hold anything of it: a name resolves
    /// among those alone, and one that a single patch holds resolves alike in any order (a
    /// swap between orders of the same patches keeps just the names several hold, in `memo`).
    private mutating func visit(_ dir: NodeID, _ path: LayerPath, _ before: [Layer], _ after: [Layer]) throws(Errno) {
        guard cached.directories.contains(dir) else { return }
        let contested: [SwapMemo.Name]
        let merged = Set(before.map(ObjectIdentifier.init))
        if reordersOnly, let known = memo.contested[path], known.merged == merged {
            contested = known.names
        } else {
            contested = try names(in: path, held: before, keepingSingle: !reordersOnly)
            if reordersOnly { memo.contested[path] = SwapMemo.Directory(merged: merged, names: contested) }
        }
        for item in contested {
            let key = NodeTable.ChildKey(parent: dir, name: item.name)
            let name = item.name
            let child = cached.children[key]
            // a name nothing cached names matters only to the directory's listing
            if child == nil, !cached.absent.contains(key), listings.contains(dir) { continue }
            var held: [Holder] = []
            for holder in item.holders {
                let id = ObjectIdentifier(holder.layer)
                // a patch that does not merge the directory here holds nothing of it
                guard merged.contains(id), let was = oldNumbers[id], let now = numbers[id] else { continue }
                held.append(Holder(old: was, new: Int32(now), type: holder.type, whiteout: holder.whiteout, opaque: holder.opaque))
            }
            held.sort { $0.old < $1.old }
            let reordered = held.sorted { $0.new < $1.new }
            let was = resolve(held)
            let now = resolve(reordered)
            guard was == now else {
                listings.insert(dir)
                changedNames.append(key)
                if let child {
                    decided[child] = .changed
                    if now.isDirectory || was.isDirectory { changedTrees.insert(child) }
                }
                continue
            }
            guard let child, now.isDirectory, let placement = cached.placements[child] else { continue }
            // the same patches in the same order: nothing beneath resolves otherwise (its
            // names are held by these patches alone), and the node renumbers as it is
            if was.merged == now.merged { continue }
            let layers = now.merged.map { old[Int($0)] }
            let moved = self.placement(placement, merging: layers)
            decided[child] = .placed(moved)
            if old[Int(placement.top)] !== new[Int(moved.top)] { attributesChanged.insert(child) }
            try visit(child, path.appending(name), was.merged.map { old[Int($0)] }, layers)
        }
    }

    /// The names of the directory at `path` that the patches `held` (those that have it) hold
    /// anything of (an entry, a whiteout file), each with its holders in their order; only
    /// those with several holders unless `keepingSingle`.
    private func names(in path: LayerPath, held: [Layer], keepingSingle: Bool) throws(Errno) -> [SwapMemo.Name] {
        var byName: [NodeTable.ChildKey: Int] = [:]
        var names: [SwapMemo.Name] = []
        let epoch = watch.epoch
        for layer in held {
            guard let index = layer.index, let record = try index.directory(path, of: layer, watch: watch, epoch: epoch) else {
                continue
            }
            record.entries.withNames { list in
                for entry in record.entries.entries {
                    let name = list.name(entry)
                    if name.starts(with: Whiteout.reservedPrefix) { continue }
                    let hidden = Whiteout.hiddenName(name)
                    let key = NodeTable.ChildKey(parent: 0, name: Array(hidden ?? name))
                    let slot: Int
                    if let known = byName[key] {
                        slot = known
                    } else {
                        slot = names.count
                        byName[key] = slot
                        names.append(SwapMemo.Name(name: key.name, holders: []))
                    }
                    if names[slot].holders.last?.layer !== layer {
                        names[slot].holders.append(SwapMemo.Holder(layer: layer, type: nil, whiteout: false, opaque: false))
                    }
                    let last = names[slot].holders.count - 1
                    if hidden != nil {
                        names[slot].holders[last].whiteout = true
                    } else {
                        names[slot].holders[last].type = entry.isWhiteoutDevice ? LayerIndex.whiteoutType : entry.type
                    }
                }
            }
        }
        if !keepingSingle { names = names.filter { $0.holders.count > 1 } }
        // each directory's opacity, asked of its patch's index once for every later swap
        for slot in names.indices {
            for holder in names[slot].holders.indices where names[slot].holders[holder].type == UInt8(DT_DIR) {
                let layer = names[slot].holders[holder].layer
                names[slot].holders[holder].opaque = try isOpaque(layer, path.appending(names[slot].name))
            }
        }
        return names
    }

    /// The new placement of a directory placed `placement` in the old stack that merges the
    /// patches `merged` (in the new order): its top the substitution or the main bundle where
    /// it was, else the first of them, and its bottom the last of them unless it is the
    /// substitution or the main bundle.
    private func placement(_ placement: Placement, merging merged: [Layer]) -> Placement {
        func isPatch(_ layer: UInt16) -> Bool { Int(layer) != old.mainIndex && !(old.substitution != nil && layer == 0) }
        let top = isPatch(placement.top) ? merged.first.flatMap { numbers[ObjectIdentifier($0)] }
            : numbers[ObjectIdentifier(old[Int(placement.top)])]
        let bottom = isPatch(placement.bottom) ? merged.last.flatMap { numbers[ObjectIdentifier($0)] }
            : numbers[ObjectIdentifier(old[Int(placement.bottom)])]
        return Placement(top: top ?? 0, bottom: bottom ?? top ?? 0, isDirectory: true)
    }

    /// How a name resolves among the patches that hold anything of it, `order` (top
    /// first): as `Resolver.resolve` does, from their records.
    private func resolve(_ order: [Holder]) -> Resolution {
        var found = Resolution()
        // the patch whose directory merged last
        var lastHolder: Holder? = nil
        // the patches passed since the entry last taken (its own included), whose whiteout
        // files would hide what lies below them
        var unchecked = 0
        for (position, holder) in order.enumerated() {
            guard let type = holder.type else { continue }
            if type == LayerIndex.whiteoutType || (found.top != nil && type != UInt8(DT_DIR))
                || order[unchecked..<position].contains(where: \.whiteout) {
                found.hidesBelow = true
                return found
            }
            if let last = lastHolder {
                if last.opaque {
                    found.hidesBelow = true
                    return found
                }
                found.merged.append(holder.old)
                lastHolder = holder
            } else {
                found.top = holder.old
                found.isDirectory = type == UInt8(DT_DIR)
                if !found.isDirectory {
                    found.hidesBelow = true
                    return found
                }
                found.merged = [holder.old]
                lastHolder = holder
            }
            unchecked = position
        }
        if order[unchecked...].contains(where: \.whiteout) {
            found.hidesBelow = true
        } else if let last = lastHolder, last.opaque {
            found.hidesBelow = true
        }
        return found
    }

    private func isOpaque(_ layer: Layer, _ path: LayerPath) throws(Errno) -> Bool {
        guard let index = layer.index else { return false }
        return try index.directory(path, of: layer, watch: watch)?.isOpaque ?? false
    }
}

/// What a swap between orders of the same patches keeps for the next one: for each directory
/// it looked into, the names several of the patches hold anything of (a name one patch holds
/// resolves alike in every order), with those patches. Dropped at every invalidation (what
/// the patches hold may have changed) and by a swap to other patches.
struct SwapMemo: Sendable {
    struct Holder: Sendable {
        var layer: Layer
        var type: UInt8?
        var whiteout: Bool
        /// Its directory of the name is opaque.
        var opaque: Bool
    }

    struct Name: Sendable {
        var name: [UInt8]
        var holders: [Holder]
    }

    /// A directory's names, as the patches it merged held them.
    struct Directory: Sendable {
        var merged: Set<ObjectIdentifier>
        var names: [Name]
    }

    /// The patches it speaks of.
    var patches: Set<ObjectIdentifier> = []
    var contested: [LayerPath: Directory] = [:]
}
