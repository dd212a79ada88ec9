#if canImport(Glibc)
import Glibc
#endif

/// The patches while mounted: shown in `.layers`, replaced, and read ahead.
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
        let watch = views.watch
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

    /// Replaces the patches with `patches` (highest priority first) as one change (see
    /// `Views.replacePatches`). Returns what the kernel must forget (see `invalidate`).
    public func replacePatches(_ patches: [Layer], listingNames: Bool = true) throws(Errno) -> Invalidation {
        try views.replacePatches(patches, listingNames: listingNames)
    }
}
