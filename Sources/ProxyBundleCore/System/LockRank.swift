/// Every lock of the daemon, by rank, lowest first: the one place its lock order is written
/// (docs/DESIGN.md's table is checked against it by `LockRankTests`). A thread holding a lock
/// takes only locks of a higher rank, never one of the same rank (no lock is re-entrant) or a
/// lower one, and none at all while it holds a leaf. Debug builds check every acquisition (see
/// `LockOrder`); each lock names its rank where it is declared.
public enum LockRank: Int, CaseIterable, Sendable {
    /// `FuseServer.invalidations`: held for a whole invalidation or change of the patches, during
    /// which the daemon calls into the layers and the overlay and notifies the kernel.
    case invalidations = 1
    /// `Views.installs`: held while an invalidation or a swap makes and publishes a new view,
    /// and while a remount changes writability. Requests never take it.
    case installs
    /// `Views.swapMemo`: what a swap keeps for the next, read and changed while a view is made.
    case swapMemo
    /// `Overlay.changes`: held shared by every change of the substitution through the mount for
    /// its whole length, alone by a rename that materializes a directory; taken only by
    /// `Request.changing` and `Request.changingAlone`.
    case changes
    /// `DirectoryCache`'s entries.
    case directoryCache
    /// `NodeTable.state`: held for table changes only; no system call under it.
    case nodeTable
    /// `Spellings`' tables (taken under `nodeTable` where names fold).
    case spellings

    /// The leaves, each held only to read or swap a value, never while taking another lock.
    /// `Views.currentView`.
    case currentView = 100
    /// `Views.recentViews`, `Views.recentPatchesByPath`, `MountChanges`' state.
    case recentViews
    /// `Views.controlTime`.
    case controlTime
    /// `CopyUp.longCopies`.
    case longCopies
    /// `Substitution`'s state.
    case substitution
    /// `LayerWatch`'s state (adds inotify watches under it).
    case layerWatch
    /// `LayerIndex`'s state.
    case layerIndex
    /// `NameMap`'s kept maps.
    case nameMap
    /// `KnownNames`' state.
    case knownNames
    /// `Workspace`'s counter.
    case workspace
    /// `DirectoryDescriptors`' lazily opened descriptors and its `unread` flag.
    case directoryDescriptors
    /// `Closer`'s queue.
    case closer
    /// FUSE target: `KernelNotifier`'s state (never held while notifying) and `acceptsEpoch`.
    case kernelNotifier
    /// FUSE target: `FuseServer`'s `currentTimeouts`, `enforcesACL`, `watching`, `workers`,
    /// `extendedAttributeReads` and `interruptedRequests`.
    case serverSettings
    /// FUSE target: `ListingStore`'s state.
    case listingStore
    /// FUSE target: `ListingReaders`' state.
    case listingReaders
    /// FUSE target: `Passthrough`'s state (no system call or ioctl under it).
    case passthrough
    /// FUSE target: `Prefetcher`'s mutex (`mincore` under it).
    case prefetcher
    /// The command line's `WriterLock` descriptor.
    case writerLock
    /// A lock local to one function, or one of a test: a leaf.
    case local

    /// Whether the lock is a leaf: a thread holding it takes no other lock.
    public var isLeaf: Bool { rawValue >= LockRank.currentView.rawValue }

    /// Whether the lock's holder makes no system call (each one it makes waits on the file
    /// system, which may wait on the kernel, which may wait on a request needing this lock).
    public var forbidsSystemCalls: Bool { self == .nodeTable || self == .passthrough }

    /// Whether the kernel may be notified while it is held: only during an invalidation (a
    /// notification may wait for a directory lock a request in flight holds, and that request
    /// never needs `invalidations`).
    public var allowsNotifying: Bool { self == .invalidations }
}
