#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// `-o watch`: the daemon invalidates by itself once changes in the layers settle, as if
/// `.invalidate` had been written, so that files dropped into a layer show in the running app
/// without anyone asking. It waits on the inotify watches exact invalidation keeps on every
/// directory it has looked into; a change settles after 100 ms without another (or 1 s after
/// the first, for a writer that never pauses). Changes made through the mount show there too,
/// so they cost an invalidation of the names they touched.
extension FuseServer {
    /// Starts the thread that invalidates on changes, for the life of the daemon.
    public func startWatching() {
        overlay.watchPatchDirectories()
        watching.withLock { $0 = true }
        if !DetachedThread.start({ self.watchLayers() }) {
            logger.warning("cannot start watching the layers: \(Errno.current.name)")
        }
    }

    /// Ends the watching (the session is over).
    func stopWatching() {
        watching.withLock { $0 = false }
    }

    private func watchLayers() {
        while watching.withLock({ $0 }) {
            guard overlay.waitForSettledChanges(idle: 500, quiet: 100, longest: 1000), watching.withLock({ $0 }) else {
                continue
            }
            do {
                try invalidate([], automatic: true)
            } catch {
                logger.warning("automatic invalidation failed: \(error.name)")
            }
        }
    }
}
