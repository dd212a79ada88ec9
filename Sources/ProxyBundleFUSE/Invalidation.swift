#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// `.invalidate`: flushes the daemon's cache, then the kernel's, before the write that asked
/// for it returns.
///
/// Deadlock-freedom: the kernel refuses (waits forever on) an invalidation of an object the
/// current request holds locked. An invalidation runs only from a write or truncate of
/// `.invalidate` itself, during which the kernel holds nothing but that file's own lock; it
/// never invalidates `.invalidate`, and never runs from a create of it (which holds the root
/// directory's lock). Other requests keep being served meanwhile by the other worker threads,
/// so a name locked by a request in flight is released and then invalidated.
extension FuseServer {
    /// What `.stats` reports about invalidations.
    struct InvalidationRecord {
        var count: UInt64 = 0
        /// Those run by `-o watch`.
        var automatic: UInt64 = 0
        var lastSeconds: Double = 0
        var last = Touched(exact: false)
    }

    /// Invalidates what `text` names: one relative path per line, or everything when no
    /// line names a path. Invalidations run one at a time; `automatic` ones (`-o watch`) are
    /// counted apart too.
    func invalidate(_ text: [UInt8], automatic: Bool = false) throws(Errno) {
        let paths = ControlInput.lines(text)
        try invalidations.withLock { (record: inout InvalidationRecord) throws(Errno) in
            var start = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            var touched = Touched()
            if paths.isEmpty {
                touched = try invalidate(subtree: nil)
            } else {
                for path in paths { touched.add(try invalidate(subtree: path)) }
            }
            var end = timespec()
            clock_gettime(CLOCK_MONOTONIC, &end)
            record.count += 1
            if automatic { record.automatic += 1 }
            record.lastSeconds = Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
            record.last = touched
        }
    }

    /// Run by the kernel notifier's worker when more names waited for it than it keeps
    /// (`KernelNotifier.queueLimit`): every name the kernel cached is forgotten, as by `/`
    /// written to `.invalidate`.
    func invalidateEverything() {
        logger.info("more names to forget than the notifier keeps: invalidating everything")
        do throws(Errno) { try invalidate(Array("/".utf8)) } catch { logger.warning("invalidation failed: \(error.name)") }
    }

    /// What invalidations told the kernel about: nodes, names one by one (0 when the kernel
    /// expired them all at once), and whether only what changed was forgotten.
    struct Touched {
        var nodes = 0
        var names = 0
        var exact = true

        mutating func add(_ other: Touched) {
            nodes += other.nodes
            names += other.names
            exact = exact && other.exact
        }
    }

    /// One invalidation.
    private func invalidate(subtree: [UInt8]?) throws(Errno) -> Touched {
        let epochKnownToWork = notifier.acceptsEpoch.withLock { $0 } == true
        return forget(try overlay.invalidate(subtree: subtree, listingNames: !epochKnownToWork))
    }

    /// Tells the kernel to forget what an invalidation of the overlay touched.
    private func forget(_ touched: Overlay.Invalidation) -> Touched {
        var names = 0
        if touched.exact || !notifier.expireAllNames() {
            for entry in touched.entries { notifier.invalidateName(entry.name, in: entry.parent) }
            names = touched.entries.count
        }
        for node in touched.nodes { notifier.invalidateNode(node) }
        return Touched(nodes: touched.nodes.count, names: names, exact: touched.exact)
    }

    /// `.layers` was written: the patches become the directories it names (absolute paths, one
    /// per line, highest priority first; none for no patches), and every cache is flushed, as
    /// by an invalidation, before the write returns. ENOENT or ENOTDIR for a path that is not a
    /// directory, EINVAL for a relative path, a path inside the mount, or a directory given
    /// twice or already a layer; nothing changes then.
    /// A patch already in the stack (or in one of the few it recently replaced) whose path still
    /// names the same directory is kept as it is (its descriptor, mount copy and index), not
    /// opened again.
    func replacePatches(_ text: [UInt8]) throws(Errno) {
        var patches: [Layer] = []
        var mountDevice: String?? = nil  // read once a path is opened anew
        let paths = try ControlInput.patchPaths(text, mountpoint: mountpoint)
        for (path, kept) in zip(paths, overlay.keptPatches(paths)) {
            if let kept {
                patches.append(kept)
                continue
            }
            let layer = try Layer(path: path, preservesAccessTimes: true, foldsNames: overlay.currentLayers.foldsNames, indexed: true)
            // a symlink may still have led into the mount
            if mountDevice == nil { mountDevice = .some(MountTable.current().mount(at: mountpoint)?.device) }
            if let device = mountDevice ?? nil, FuseServer.deviceName(layer.device) == device { throw Errno.invalid }
            patches.append(layer)
        }
        try invalidations.withLock { (record: inout InvalidationRecord) throws(Errno) in
            var start = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            let epochKnownToWork = notifier.acceptsEpoch.withLock { $0 } == true
            let touched = forget(try overlay.replacePatches(patches, listingNames: !epochKnownToWork))
            var end = timespec()
            clock_gettime(CLOCK_MONOTONIC, &end)
            record.count += 1
            record.last = touched
            record.lastSeconds = Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
        }
    }

    /// A device number as mountinfo writes it, "major:minor".
    static func deviceName(_ device: UInt64) -> String {
        let major = (device >> 8) & 0xfff | (device >> 32) & ~0xfff
        let minor = device & 0xff | (device >> 12) & ~0xff
        return "\(major):\(minor)"
    }
}
