#if canImport(Glibc)
import Glibc
#endif

/// The patches while mounted: shown in `.layers`, replaced, and read ahead.
extension Overlay {
    /// Reads the directories of every patch into its index on `threads` threads of their own
    /// (a patch at a time each, top first; up to `LayerIndex.aheadBudget` directories a patch),
    /// and returns once they are all read or `seconds` have passed, whichever comes first (the
    /// threads then go on): with thousands of thin patches, the first lookups on a fresh mount
    /// need nearly every patch's directories near the root and on their paths, and read while
    /// they come, the directories would cost them more than the lookups (measured under
    /// 10,000 thin patches: BENCHMARKS.md, "Reading the indexes"). The mount is reported
    /// ready after this. A directory still unread is read by what needs it first. The reads
    /// overlap on the disk. Nothing where nothing is cached (`-o nocache`) or names fold.
    /// Returns whether every patch was read.
    @discardableResult
    public func readPatchesAhead(threads: Int = 2, waitingUpTo seconds: Double = 0) -> Bool {
        guard cachesLookups else { return true }
        let patches = currentLayers.patches.filter { $0.index != nil }
        guard !patches.isEmpty else { return true }
        // the next patch to read, and how many threads are still reading
        let progress = Locked((next: 0, running: min(threads, patches.count)), rank: .local)
        let watch = views.watch
        for _ in 0..<min(threads, patches.count) {
            let started = DetachedThread.start {
                while true {
                    let number = progress.withLock { progress -> Int in
                        defer { progress.next += 1 }
                        return progress.next
                    }
                    guard number < patches.count, let index = patches[number].index else { break }
                    index.readAhead(of: patches[number], watch: watch, budget: LayerIndex.aheadBudget)
                }
                progress.withLock { $0.running -= 1 }
            }
            if !started { progress.withLock { $0.running -= 1 } }
        }
        // polled: the wait is once a mount, and its end need not be sharper than 2 ms
        var waited = 0.0
        while progress.withLock({ $0.running > 0 }) {
            guard waited < seconds else { return false }
            usleep(2000)
            waited += 0.002
        }
        return true
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
