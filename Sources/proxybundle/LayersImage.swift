import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

/// `layers --set-image`, `--rollback` and `--history`: a mount's patches as an image's layers,
/// with each switch kept in the store's history of the mountpoint. The store's lock is held
/// from the pull to the history's write, so `gc` never sees layers set but not yet recorded.
extension LayersCommand {
    func switchTo(_ reference: String, _ mount: RunningMount) throws(Failure) {
        try store.locked { () throws(Failure) in
            let pulled = try store.pull(reference, registry: registry, limits: limits, lockHeld: true, unlessUnchanged: true)
            let patches = patches(of: pulled)
            // a timer that follows a tag that has not moved changes nothing
            if mount.patches.map(Paths.absolute) != patches { try setPatches(mount, patches) }
            var history = History(store: store.store, mountpoint: mount.mountpoint.bytes)
            if history.setCurrent(pulled) { try save(history) }
        }
    }

    func rollBack(_ mount: RunningMount) throws(Failure) {
        try store.locked { () throws(Failure) in
            var history = History(store: store.store, mountpoint: mount.mountpoint.bytes)
            let previous: Int
            do { previous = try history.rollBack() } catch { throw Failure("\(mount.mountpoint): \(error)") }
            let image = history.entries[previous].image
            if let missing = image.diffIDs.first(where: { !store.store.layerExists($0) }) {
                throw Failure("\(mount.mountpoint): layer \(missing) of \(image.reference) is no longer in the store; "
                                  + "set it with --set-image \(image.reference)")
            }
            // the policy in force now, against the signatures kept when it was pulled
            history.verified(previous, by: try store.verify(image, registry: registry))
            try setPatches(mount, patches(of: image))
            try save(history)
        }
    }

    func printHistory(_ mountpoint: RawPath) {
        let history = History(store: store.store, mountpoint: mountpoint.bytes)
        let current = history.current
        for (index, entry) in history.entries.enumerated() {
            let mark = entry.rolledBack ? "  (rolled back)" : index == current ? "  (current)" : ""
            print("\(History.format(entry.time))  \(entry.image.reference)  \(entry.image.manifestDigest)  "
                  + "\(entry.image.diffIDs.count) layers  \(entry.image.verification)\(mark)")
        }
    }

    /// The image's layer directories, top first: the patches, highest priority first.
    private func patches(of image: PulledImage) -> [RawPath] {
        image.diffIDs.reversed().map { RawPath(store.store.layerPath($0)) }
    }

    private func save(_ history: History) throws(Failure) {
        do { try history.save() } catch { throw Failure("the patches are set, but the history is not: \(error)") }
    }
}
