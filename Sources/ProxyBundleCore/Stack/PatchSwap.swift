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
/// what the cached directories hold when they were looked into), and costs what the names
/// several patches hold cost: each patch is named by its slot in `memo`, each slot's numbers
/// in both stacks are two arrays, and a directory's name that only directories merge (no
/// whiteout, none opaque) resolves alike in every order without being resolved at all.
struct PatchSwap {
    let old: LayerStack
    let new: LayerStack
    let watch: LayerWatch
    /// What the node table cached when the swap began (set before `run`).
    var cached = NodeTable.SwapSnapshot()
    /// Where the names cached in each directory are asked.
    let nodes: NodeTable
    /// Each layer's number in the new stack, by the layer (the substitution and the main bundle).
    private let numbers: [ObjectIdentifier: Int]
    /// Each patch's number in the old stack and in the new, by its slot in `memo` (-1: not in it).
    private let oldOf: [Int32]
    private let newOf: [Int32]

    var decided: [NodeID: NodeTable.SwapDecision] = [:]
    var changedNames: [NodeTable.ChildKey] = []
    /// Directories whose listing changed.
    var listings: Set<NodeID> = []
    /// Directories (changed themselves) whose cached names beneath all go.
    var changedTrees: Set<NodeID> = []
    /// Directories whose attributes now come from another patch (its first in the new order).
    var attributesChanged: Set<NodeID> = []

    /// Whether the new stack has the same patches as the old, in another order.
    let reordersOnly: Bool
    /// What a swap between orders of these patches keeps (see `SwapMemo`).
    var memo: SwapMemo

    init(old: LayerStack, new: LayerStack, watch: LayerWatch, nodes: NodeTable, memo: SwapMemo) {
        self.old = old
        self.new = new
        self.watch = watch
        self.nodes = nodes
        let patches = Set(old.patches.map(ObjectIdentifier.init))
        reordersOnly = patches == Set(new.patches.map(ObjectIdentifier.init))
        var memo = memo.patches == patches ? memo : SwapMemo(old.patches)
        for layer in new.patches where memo.slots[ObjectIdentifier(layer)] == nil { memo.add(layer) }
        self.memo = memo
        numbers = Dictionary(new.layers.indices.map { (ObjectIdentifier(new.layers[$0]), $0) }, uniquingKeysWith: { a, _ in a })
        func numbering(_ stack: LayerStack) -> [Int32] {
            var result = [Int32](repeating: -1, count: memo.layers.count)
            for index in stack.patches.indices {
                if let slot = memo.slots[ObjectIdentifier(stack[index])] { result[Int(slot)] = Int32(index) }
            }
            return result
        }
        oldOf = numbering(old)
        newOf = numbering(new)
    }

    /// Whether the swap can be told from indexes: every patch of both stacks has one.
    static func applies(from old: LayerStack, to new: LayerStack) -> Bool {
        !old.foldsNames && old.patches.allSatisfy { $0.index != nil } && new.patches.allSatisfy { $0.index != nil }
    }

    /// Where the root merges in the new stack, for a swap between orders of the same patches
    /// from a stack whose root was placed `oldRoot` (nil for other swaps): down to the first
    /// patch whose root is opaque in the new order (which `memo` keeps, so the swap asks no
    /// index), unless the substitution's is.
    mutating func newRoot(after oldRoot: Placement) throws(Errno) -> Placement? {
        guard reordersOnly else { return nil }
        if old.substitution != nil && oldRoot.bottom == 0 { return oldRoot }
        if memo.opaqueRoots == nil {
            var opaque: [Int32] = []
            for (slot, layer) in memo.layers.enumerated() where try isOpaque(layer, .root) { opaque.append(Int32(slot)) }
            memo.opaqueRoots = opaque
        }
        let first = memo.opaqueRoots?.map { newOf[Int($0)] }.filter { $0 >= 0 }.min()
        return Placement(top: 0, bottom: first.map(Int.init) ?? new.mainIndex, isDirectory: true)
    }

    /// Goes through the cached names beneath the root (placed `oldRoot` and `newRoot`).
    mutating func run(oldRoot: Placement, newRoot: Placement) throws(Errno) -> Bool {
        // the slots of the patches the root merges in a stack placed `root`, with `numbers`
        func rootSlots(_ stack: LayerStack, _ root: Placement, _ numbers: [Int32]) -> [Int32] {
            let first = stack.substitution == nil ? 0 : 1
            return numbers.indices.filter { slot in
                let number = Int(numbers[slot])
                return number >= first && number < stack.mainIndex && root.layers.contains(number)
            }.map(Int32.init)
        }
        let before = rootSlots(old, oldRoot, oldOf)
        // the root merges the same patches, and the main bundle in both or neither
        guard before == rootSlots(new, newRoot, newOf),
              (Int(oldRoot.bottom) == old.mainIndex) == (Int(newRoot.bottom) == new.mainIndex) else { return false }
        try visit(rootNodeID, .root, before)
        return true
    }

    /// How a name resolves among the patches (see `Resolver.resolve`): the patch serving it,
    /// the patches a directory merges (in order), and whether what lies below the patches (the
    /// main bundle) is hidden. Patches are named by their slots.
    private struct Resolution {
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
    }

    /// What one patch holds under a name in a directory (see `SwapMemo.Holder`), with its
    /// numbers in the old stack and in the new.
    private struct Holder {
        var slot: Int32
        var old: Int32
        var new: Int32
        var type: UInt8?
        var whiteout: Bool
        var opaque: Bool
    }

    /// Looks at the cached names of directory node `dir` at `path`, which merges the patches
    /// of slots `merged` in both stacks. One pass over their records finds, for each name, the
    /// patches that hold anything of it: a name resolves among those alone, and one that a
    /// single patch holds resolves alike in any order (a swap between orders of the same
    /// patches keeps just the names several hold, in `memo`).
    private mutating func visit(_ dir: NodeID, _ path: LayerPath, _ merged: [Int32]) throws(Errno) {
        guard cached.directories.contains(dir) else { return }
        let sorted = merged.sorted()
        let contested: [SwapMemo.Name]
        if reordersOnly, let known = memo.contested[path], known.merged == sorted {
            contested = known.names
        } else {
            contested = try names(in: path, held: merged, keepingSingle: !reordersOnly)
            if reordersOnly { memo.contested[path] = SwapMemo.Directory(merged: sorted, names: contested) }
        }
        guard !contested.isEmpty else { return }
        var merges = [Bool](repeating: false, count: oldOf.count)
        for slot in merged { merges[Int(slot)] = true }
        let found = nodes.swapChildren(of: dir, contested.map(\.name), before: cached.firstNew)
        for (item, (child, absent)) in zip(contested, found) {
            // a name nothing cached names matters only to the directory's listing
            if child == nil, !absent, listings.contains(dir) { continue }
            if item.mergesAll {
                try visitMerging(item, child, in: path, merges)
                continue
            }
            var held: [Holder] = []
            for holder in item.holders where merges[Int(holder.slot)] {
                let slot = Int(holder.slot)
                held.append(Holder(slot: holder.slot, old: oldOf[slot], new: newOf[slot], type: holder.type,
                                   whiteout: holder.whiteout, opaque: holder.opaque))
            }
            // a name one patch holds here resolves alike in any order
            guard held.count > 1 else { continue }
            held.sort { $0.old < $1.old }
            let was = resolve(held)
            held.sort { $0.new < $1.new }
            let now = resolve(held)
            guard was.resolvesLike(now) else {
                let key = NodeTable.ChildKey(parent: dir, name: item.name)
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
            renumber(child, placement, top: newOf[Int(now.merged[0])], bottom: newOf[Int(now.merged[now.merged.count - 1])])
            try visit(child, path.appending(item.name), now.merged)
        }
    }

    /// A name that only directories hold (none opaque, no whiteout file): whatever the order,
    /// it is a directory merging every one of them, so it keeps its node, renumbered to the
    /// first and last of them in the new order, and its own names are looked at in turn
    /// where that order changed.
    private mutating func visitMerging(_ item: SwapMemo.Name, _ child: NodeID?, in path: LayerPath, _ merges: [Bool]) throws(Errno) {
        guard let child, let placement = cached.placements[child] else { return }
        var held: [Holder] = []
        for holder in item.holders where merges[Int(holder.slot)] {
            let slot = Int(holder.slot)
            held.append(Holder(slot: holder.slot, old: oldOf[slot], new: newOf[slot], type: holder.type, whiteout: false, opaque: false))
        }
        guard held.count > 1 else { return }
        held.sort { $0.old < $1.old }
        if zip(held, held.dropFirst()).allSatisfy({ $0.new < $1.new }) { return }  // the same order
        let top = held.min { $0.new < $1.new }!, bottom = held.max { $0.new < $1.new }!
        renumber(child, placement, top: top.new, bottom: bottom.new)
        try visit(child, path.appending(item.name), held.map(\.slot))
    }

    /// Places directory node `id`, placed `placement` in the old stack, as merging patches
    /// from number `top` to `bottom` of the new; its attributes changed where its first
    /// layer did.
    private mutating func renumber(_ id: NodeID, _ placement: Placement, top: Int32, bottom: Int32) {
        let moved = self.placement(placement, top: Int(top), bottom: Int(bottom))
        decided[id] = .placed(moved)
        if old[Int(placement.top)] !== new[Int(moved.top)] { attributesChanged.insert(id) }
    }

    /// The names of the directory at `path` that the patches of slots `held` (those that
    /// have it) hold anything of (an entry, a whiteout file), each with its holders; only
    /// those with several holders unless `keepingSingle`.
    private func names(in path: LayerPath, held: [Int32], keepingSingle: Bool) throws(Errno) -> [SwapMemo.Name] {
        var byName: [NodeTable.ChildKey: Int] = [:]
        var names: [SwapMemo.Name] = []
        let epoch = watch.epoch
        for slot in held {
            let layer = memo.layers[Int(slot)]
            guard let index = layer.index, let record = try index.directory(path, of: layer, watch: watch, epoch: epoch) else {
                continue
            }
            record.entries.withNames { list in
                for entry in record.entries.entries {
                    let name = list.name(entry)
                    if name.starts(with: Whiteout.reservedPrefix) { continue }
                    let hidden = Whiteout.hiddenName(name)
                    let key = NodeTable.ChildKey(parent: 0, name: Array(hidden ?? name))
                    let at: Int
                    if let known = byName[key] {
                        at = known
                    } else {
                        at = names.count
                        byName[key] = at
                        names.append(SwapMemo.Name(name: key.name, holders: []))
                    }
                    if names[at].holders.last?.slot != slot {
                        names[at].holders.append(SwapMemo.Holder(slot: slot, type: nil, whiteout: false, opaque: false))
                    }
                    let last = names[at].holders.count - 1
                    if hidden != nil {
                        names[at].holders[last].whiteout = true
                    } else {
                        names[at].holders[last].type = entry.isWhiteoutDevice ? LayerIndex.whiteoutType : entry.type
                    }
                }
            }
        }
        if !keepingSingle { names = names.filter { $0.holders.count > 1 } }
        // each directory's opacity, asked of its patch's index once for every later swap
        for at in names.indices {
            for holder in names[at].holders.indices where names[at].holders[holder].type == UInt8(DT_DIR) {
                let layer = memo.layers[Int(names[at].holders[holder].slot)]
                names[at].holders[holder].opaque = try isOpaque(layer, path.appending(names[at].name))
            }
            names[at].mergesAll = names[at].holders.allSatisfy { $0.type == UInt8(DT_DIR) && !$0.whiteout && !$0.opaque }
        }
        return names
    }

    /// The new placement of a directory placed `placement` in the old stack that merges the
    /// patches numbered `top` to `bottom` in the new: its top the substitution or the main
    /// bundle where it was, else `top`, and its bottom `bottom` unless it is the
    /// substitution or the main bundle.
    private func placement(_ placement: Placement, top: Int, bottom: Int) -> Placement {
        func isPatch(_ layer: UInt16) -> Bool { Int(layer) != old.mainIndex && !(old.substitution != nil && layer == 0) }
        let newTop = isPatch(placement.top) ? top : numbers[ObjectIdentifier(old[Int(placement.top)])]
        let newBottom = isPatch(placement.bottom) ? bottom : numbers[ObjectIdentifier(old[Int(placement.bottom)])]
        return Placement(top: newTop ?? 0, bottom: newBottom ?? newTop ?? 0, isDirectory: true)
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
                found.merged.append(holder.slot)
                lastHolder = holder
            } else {
                found.top = holder.slot
                found.isDirectory = type == UInt8(DT_DIR)
                if !found.isDirectory {
                    found.hidesBelow = true
                    return found
                }
                found.merged = [holder.slot]
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

/// What a swap between orders of the same patches keeps for the next one: each patch's slot
/// (the swap numbers them by it in both stacks), and for each directory it looked into, the
/// names several of the patches hold anything of (a name one patch holds resolves alike in
/// every order), with those patches. Dropped at every invalidation (what the patches hold may
/// have changed) and by a swap to other patches.
struct SwapMemo: Sendable {
    struct Holder: Sendable {
        var slot: Int32
        var type: UInt8?
        var whiteout: Bool
        /// Its directory of the name is opaque.
        var opaque: Bool
    }

    struct Name: Sendable {
        var name: [UInt8]
        var holders: [Holder]
        /// Every holder has a directory of the name, none opaque, and no whiteout file for
        /// it: the name merges all of them in any order.
        var mergesAll = false
    }

    /// A directory's names, as the patches it merged (their slots, ascending) held them.
    struct Directory: Sendable {
        var merged: [Int32]
        var names: [Name]
    }

    /// The patches it speaks of.
    var patches: Set<ObjectIdentifier> = []
    /// The patches by slot, and each one's slot.
    private(set) var layers: [Layer] = []
    private(set) var slots: [ObjectIdentifier: Int32] = [:]
    var contested: [LayerPath: Directory] = [:]
    /// The slots of the patches whose root is opaque, once asked.
    var opaqueRoots: [Int32]?

    init() {}

    /// A memo of `patches`, slotted in that order.
    init<S: Sequence>(_ patches: S) where S.Element == Layer {
        for layer in patches { add(layer) }
        self.patches = Set(layers.map(ObjectIdentifier.init))
    }

    /// Gives `layer` a slot (a patch of a stack swapped to, not one the memo speaks of).
    mutating func add(_ layer: Layer) {
        guard slots[ObjectIdentifier(layer)] == nil else { return }
        slots[ObjectIdentifier(layer)] = Int32(layers.count)
        layers.append(layer)
    }
}
