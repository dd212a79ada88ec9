#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Reads ahead, on a thread of its own, the directories a walk is about to list (and the
/// attributes of their entries), so that its disk reads overlap those of the walk: a walk
/// through FUSE otherwise waits for each read in turn, as the daemon answers one request at a
/// time for it. The directory announced last goes first, as a walk goes depth first; one the
/// walk lists first is dropped; at most 4,096 wait. The thread runs at a lower priority and
/// changes nothing.
final class Prefetcher: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var pending: [(parent: NodeID, name: [UInt8])] = []
    private var count: UInt64 = 0
    private let overlay: Overlay
    static let limit = 4096

    init(overlay: Overlay) {
        self.overlay = overlay
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
        var thread = pthread_t()
        // the thread keeps this object for the life of the daemon
        let context = Unmanaged.passRetained(self).toOpaque()
        if pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<Prefetcher>.fromOpaque(context).takeUnretainedValue().run()
            return nil
        }, context) == 0 {
            pthread_detach(thread)
        } else {
            Unmanaged<Prefetcher>.fromOpaque(context).release()
        }
    }

    /// Announces the subdirectories of `listing`, in the order a walk will list them. The
    /// directory listed (at `listed` in its parent) needs no reading ahead any more.
    func announce(subdirectoriesOf listing: DirectoryListing, listed: (parent: NodeID, name: [UInt8])?) {
        let names = listing.items.dropFirst(2).filter { $0.type == UInt8(DT_DIR) }.map(listing.name)
        pthread_mutex_lock(&mutex)
        if let listed, let index = pending.lastIndex(where: { $0.parent == listed.parent && $0.name == listed.name }) {
            pending.remove(at: index)
        }
        pending.append(contentsOf: names.reversed().map { (listing.node, $0) })
        if pending.count > Self.limit { pending.removeFirst(pending.count - Self.limit) }
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    /// Directories read ahead so far, for `.stats`.
    var warmed: UInt64 {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return count
    }

    private func run() {
        // on Linux, 0 means this thread alone
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        while true {
            pthread_mutex_lock(&mutex)
            while pending.isEmpty { pthread_cond_wait(&condition, &mutex) }
            let next = pending.removeLast()
            count += 1
            pthread_mutex_unlock(&mutex)
            overlay.warmSubdirectory(next.name, of: next.parent)
        }
    }
}
