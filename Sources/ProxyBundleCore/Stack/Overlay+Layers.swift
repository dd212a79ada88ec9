#if canImport(Glibc)
import Glibc
#endif

/// Changing the patches while mounted (`.layers`), and reading them ahead.
extension Overlay {
    /// Reads the directories of every patch into its index on `threads` threads of their own
    /// (a patch at a time each, top first; up to `LayerIndex.aheadBudget` directories a patch),
    /// and returns at once: with thousands of thin patches, the directories a first lookup
    /// needs are then known, or read by the lookup itself if it comes first. The reads overlap
    /// on the disk. Nothing where nothing is cached (`-o nocache`) or names fold.
    public func readPatchesAhead(threads: Int = 4) {
        guard cachesLookups else { return }
        let patches = currentLayers.patches.filter { $0.index != nil }
        guard !patches.isEmpty else { return }
        let next = Locked(0, rank: .local)
        let watch = self.watch
        for _ in 0..<min(threads, patches.count) {
            DetachedThread.start {
                while true {
                    let number = next.withLock { number -> Int in
                        defer { number += 1 }
                        return number
                    }
                    guard number < patches.count, let index = patches[number].index else { return }
                    index.readAhead(of: patches[number], watch: watch, budget: LayerIndex.aheadBudget)
                }
            }
        }
    }

    /// The layers as `.layers` shows them: one `ROLE PATH` line each, top first, each path
    /// the bytes it was opened at.
    public var layersText: [UInt8] {
        let stack = currentLayers
        return stack.layers.indices.flatMap { Array("\(stack.role($0).rawValue) ".utf8) + stack[$0].path.bytes + [0x0A] }
    }

    /// Replaces the patches with `patches` (highest priority first) as one change: every later
    /// request sees the new stack, while those in flight finish in the one they began with.
    /// What the swap changes is forgotten, and only that where the patches' indexes tell it
    /// (see `PatchSwap`): names that resolve as before keep their nodes, in the daemon and in
    /// the kernel. Otherwise (names fold, nothing is cached, or the root merges other patches)
    /// everything is forgotten. Returns what the kernel must forget (see `invalidate`).
    /// EINVAL, changing nothing, when a directory is given twice or one layer lies inside
    /// another. Files open before keep what they opened. Changes made in a kept patch behind
    /// the daemon's back show after `.invalidate`, as without a swap.
    public func replacePatches(_ patches: [Layer], listingNames: Bool = true) throws(Errno) -> Invalidation {
        let next = try currentLayers.replacingPatches(patches)
        if let swapped = try swapKeepingWhatStays(next, listingNames: listingNames) { return swapped }
        return try install(next, listingNames: listingNames)
    }

    /// Installs `next` (the same substitution and main bundle, other patches) forgetting only
    /// what it changes; nil when that cannot be told, having changed nothing.
    private func swapKeepingWhatStays(_ next: LayerStack, listingNames: Bool) throws(Errno) -> Invalidation? {
        try installs.withLock { _ throws(Errno) -> Invalidation? in
            let current = currentView.withLock { $0 }
            let old = current.layers
            guard cachesLookups, PatchSwap.applies(from: old, to: next),
                  current.generation.number == nodes.generation.number else { return nil }
            let oldRoot = current.generation.root
            let newRoot = try next.rootPlacement(index: indexWatch)
            let cached = nodes.beginSwap()
            var swap = PatchSwap(old: old, new: next, watch: watch, cached: cached, memo: swapMemo.withLock { $0 })
            let told: Bool
            do throws(Errno) {
                told = try swap.run(oldRoot: oldRoot, newRoot: newRoot)
            } catch {
                told = false
            }
            swapMemo.withLock { $0 = told ? swap.memo : SwapMemo() }
            guard told else {
                // everything is resolved again (the generation moved on already)
                let touched = nodes.invalidate(subtree: nil, root: newRoot, listingNames: listingNames)
                publishView(of: next)
                watch.restart()
                touchControlTime()
                return Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false)
            }
            // each old layer's number in the new stack (-1: not in it)
            let numbers = Dictionary(next.layers.indices.map { (ObjectIdentifier(next[$0]), $0) }, uniquingKeysWith: { a, _ in a })
            let renumbered = old.layers.map { numbers[ObjectIdentifier($0)] ?? -1 }
            let touched = nodes.finishSwap(cached, decided: swap.decided, changedNames: swap.changedNames,
                                           listings: swap.listings.union(swap.attributesChanged),
                                           changedTrees: swap.changedTrees, root: newRoot) { placement in
                guard Int(placement.bottom) < renumbered.count, case let top = renumbered[Int(placement.top)],
                      case let bottom = renumbered[Int(placement.bottom)], top >= 0, bottom >= 0 else { return nil }
                return Placement(top: top, bottom: bottom, isDirectory: placement.isDirectory)
            }
            publishView(of: next)
            watch.keepWatching(placements: nodes.freshPlacements(of: watch.watchedPlacements.keys))
            touchControlTime()
            return Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false, exact: true)
        }
    }
}
