#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// The directory listings being read. With the kernel caching listings, the daemon answers
/// the first OPENDIR with ENOSYS, and the kernel then opens directories without asking (no
/// OPENDIR or RELEASEDIR round trip) and keeps every listing it reads. So a listing belongs
/// to no open directory: it is taken when a readdir starts at offset 0 and kept for its
/// directory until a readdir asks past its last entry (or listings of 64 other directories
/// push it out). An entry's offset is its index + 1, as kernel overlayfs numbers a merged
/// directory's entries: every offset below the last is a place in the listing, so `seekdir`
/// to any position a reader could compute reads on from there (generic/676 seeks to random
/// ones). A readdir that continues a listing no longer kept gets the directory listed again,
/// from the same index; where the directory changed meanwhile, or changed before another
/// reader started listing it again, that reader may miss or repeat a name. Where the daemon
/// answers OPENDIR (`-o nocache`), each open directory has a handle of its own and keeps its
/// own listing, as before.
final class ListingStore: Sendable {
    private struct Kept {
        let directory: NodeID
        /// The open directory's handle (0 where the kernel opens directories by itself).
        let handle: UInt64
        let listing: DirectoryListing
    }

    private struct State {
        /// Listings taken, and OPENDIR requests answered, for `.stats`.
        var taken: UInt64 = 0
        var opens: UInt64 = 0
        var lastHandle: UInt64 = 0
        /// Most recently used last.
        var kept: [Kept] = []
    }

    /// How many listings are kept.
    static let capacity = 64
    private let state = Locked(State(), rank: .listingStore)

    /// A listing of `directory` (open as `handle`) and the index to continue at, for a readdir
    /// at `offset`.
    func listing(of directory: NodeID, handle: UInt64, at offset: off_t, _ overlay: Overlay,
                 _ request: Request) throws(Errno) -> Position {
        let index = offset > 0 ? Int(clamping: offset) : 0
        if offset > 0, let kept = state.withLock({ state in Self.find(directory, handle, in: &state.kept) }) {
            return Position(listing: kept, index: index)
        }
        let listing = try overlay.listDirectory(request, directory)
        let dropped = state.withLock { state -> [Kept] in
            state.taken += 1
            var dropped = state.kept.filter { $0.directory == directory && $0.handle == handle }
            state.kept.removeAll { $0.directory == directory && $0.handle == handle }
            if state.kept.count == Self.capacity { dropped.append(state.kept.removeFirst()) }
            state.kept.append(Kept(directory: directory, handle: handle, listing: listing))
            return dropped
        }
        _ = dropped  // let go outside the lock: a listing's last holder closes its directories
        return Position(listing: listing, index: index)
    }

    /// A handle for a directory the daemon opened (OPENDIR), whose listing is its own.
    func newHandle() -> UInt64 {
        state.withLock { state in
            state.lastHandle += 1
            return state.lastHandle
        }
    }

    /// Forgets the listing of an open directory closed (RELEASEDIR).
    func closed(handle: UInt64) {
        guard handle != 0 else { return }
        let dropped = state.withLock { state -> [Kept] in
            defer { state.kept.removeAll { $0.handle == handle } }
            return state.kept.filter { $0.handle == handle }
        }
        _ = dropped  // let go outside the lock, as in `listing`
    }

    /// Counts an OPENDIR request (only the first, when the kernel caches listings).
    func noteOpen() {
        state.withLock { $0.opens += 1 }
    }

    /// Listings taken and OPENDIR requests answered so far.
    var figures: (taken: UInt64, opens: UInt64) {
        state.withLock { ($0.taken, $0.opens) }
    }

    /// Forgets a listing read past its end.
    func finished(_ position: Position) {
        state.withLock { state in
            state.kept.removeAll { $0.listing === position.listing }
        }
    }

    private static func find(_ directory: NodeID, _ handle: UInt64, in kept: inout [Kept]) -> DirectoryListing? {
        guard let index = kept.lastIndex(where: { $0.directory == directory && $0.handle == handle }) else { return nil }
        let found = kept.remove(at: index)
        kept.append(found)
        return found.listing
    }

    /// Where a readdir reads: the listing and the index of the first entry.
    struct Position {
        let listing: DirectoryListing
        let index: Int

        /// The offset of the entry after the one at `index`.
        func offset(after index: Int) -> off_t {
            off_t(index + 1)
        }
    }
}
