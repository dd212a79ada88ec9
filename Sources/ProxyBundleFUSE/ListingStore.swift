#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// The directory listings being read. With the kernel caching listings, the daemon answers
/// the first OPENDIR with ENOSYS, and the kernel then opens directories without asking (no
/// OPENDIR or RELEASEDIR round trip) and keeps every listing it reads. So a listing belongs
/// to no open directory: it is taken when a readdir starts at offset 0, and every offset in it
/// carries its generation number (high 32 bits) and an entry's index + 1 (low 32 bits). It is
/// kept until a readdir asks past its last entry, so a reader's offsets stay valid across
/// readdir calls (`telldir`/`seekdir`) while other readers start listings of their own. A
/// readdir that continues a listing no longer kept (read to its end, or pushed out by newer
/// ones) gets the directory listed again, from the same index: where the directory changed
/// meanwhile, that reader may miss or repeat a name, which takes more than 64 listings read
/// at once.
final class ListingStore: Sendable {
    private struct Kept {
        let directory: NodeID
        let generation: UInt32
        let listing: DirectoryListing
    }

    private struct State {
        var lastGeneration: UInt32 = 0
        /// Listings taken, and OPENDIR requests answered, for `.stats`.
        var taken: UInt64 = 0
        var opens: UInt64 = 0
        /// Most recently used last.
        var kept: [Kept] = []
    }

    /// How many listings are kept.
    static let capacity = 64
    private let state = Locked(State())

    /// A listing of `directory` and the index to continue at, for a readdir at `offset`.
    func listing(of directory: NodeID, at offset: off_t, _ overlay: Overlay) throws(Errno) -> Position {
        let generation = UInt32(truncatingIfNeeded: offset >> 32)
        let index = Int(offset & 0xFFFF_FFFF)
        if offset > 0, let kept = state.withLock({ state in Self.find(directory, generation, in: &state.kept) }) {
            return Position(listing: kept, generation: generation, index: index)
        }
        let listing = try overlay.listDirectory(directory)
        return state.withLock { state in
            state.taken += 1
            // below 2^31, so offsets stay positive
            state.lastGeneration = state.lastGeneration >= 0x7FFF_FFFF ? 1 : state.lastGeneration + 1
            if state.kept.count == Self.capacity { state.kept.removeFirst() }
            state.kept.append(Kept(directory: directory, generation: state.lastGeneration, listing: listing))
            return Position(listing: listing, generation: state.lastGeneration, index: offset > 0 ? index : 0)
        }
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
            state.kept.removeAll { $0.generation == position.generation && $0.listing === position.listing }
        }
    }

    private static func find(_ directory: NodeID, _ generation: UInt32, in kept: inout [Kept]) -> DirectoryListing? {
        guard let index = kept.lastIndex(where: { $0.generation == generation && $0.directory == directory }) else {
            return nil
        }
        let found = kept.remove(at: index)
        kept.append(found)
        return found.listing
    }

    /// Where a readdir reads: the listing, its generation, and the index of the first entry.
    struct Position {
        let listing: DirectoryListing
        let generation: UInt32
        let index: Int

        /// The offset of the entry after the one at `index`.
        func offset(after index: Int) -> off_t {
            off_t(generation) << 32 | off_t(index + 1)
        }
    }
}
