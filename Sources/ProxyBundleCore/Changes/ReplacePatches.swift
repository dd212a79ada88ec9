#if canImport(Glibc)
import Glibc
#endif

/// Changing the patches while mounted (`.layers`).
extension Views {
    /// Replaces the patches with `patches` (highest priority first) as one change: every later
    /// request sees the new stack, while those in flight finish in the one they began with.
    /// What the swap changes is forgotten, and only that where the patches' indexes tell it
    /// (see `PatchSwap`): names that resolve as before keep their nodes, in the daemon and in
    /// the kernel. Otherwise (names fold, nothing is cached, or the root merges other patches)
    /// everything is forgotten. Returns what the kernel must forget (see `invalidate`).
    /// EINVAL, changing nothing, when a directory is given twice or one layer lies inside
    /// another. Files open before keep what they opened. Changes made in a kept patch behind
    /// the daemon's back show after `.invalidate`, as without a swap.
    func replacePatches(_ patches: [Layer], listingNames: Bool) throws(Errno) -> Overlay.Invalidation {
        let next = try current.layers.replacingPatches(patches)
        if let swapped = try swapKeepingWhatStays(next, listingNames: listingNames) { return swapped }
        return try install(next, listingNames: listingNames)
    }

    /// Installs `next` (the same substitution and main bundle, other patches) forgetting only
    /// what it changes; nil when that cannot be told, having changed nothing.
    private func swapKeepingWhatStays(_ next: LayerStack, listingNames: Bool) throws(Errno) -> Overlay.Invalidation? {
        try installs.withLock { _ throws(Errno) -> Overlay.Invalidation? in
            let current = self.current
            let old = current.layers
            guard cachesLookups, PatchSwap.applies(from: old, to: next),
                  current.generation.number == nodes.generation.number else { return nil }
            let oldRoot = current.generation.root
            var swap = PatchSwap(old: old, new: next, watch: watch, nodes: nodes, memo: swapMemo.withLock { $0 })
            let newRoot: Placement
            if let reordered = try swap.newRoot(after: oldRoot) {
                newRoot = reordered
            } else {
                newRoot = try next.rootPlacement(index: indexWatch)
            }
            let cached = nodes.beginSwap()
            swap.cached = cached
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
                return Overlay.Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false)
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
            publishView(of: next, carryingNames: true)
            watch.keepWatching(placements: nodes.freshPlacements(of: watch.watchedPlacements.keys))
            touchControlTime()
            return Overlay.Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false, exact: true)
        }
    }
}
