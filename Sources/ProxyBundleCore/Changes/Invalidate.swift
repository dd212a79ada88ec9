#if canImport(Glibc)
import Glibc
#endif

extension Views {
    /// Forgets the cached view of the whole tree, or of `subtree` (a relative path: the names
    /// along it and everything beneath it). Reopens the substitution first if its path now
    /// names another directory (then the whole tree is invalidated).
    /// `listingNames: false` leaves `entries` empty (when the kernel can expire every name at once).
    func invalidate(subtree: [UInt8]? = nil, listingNames: Bool = true) throws(Errno) -> Overlay.Invalidation {
        if let swapped = try substitutionSwappedOnDisk() {
            return try replaceSubstitution(swapped, listingNames: listingNames)
        }
        let names = try subtree.flatMap(Views.pathNames)
        return try installs.withLock { _ throws(Errno) -> Overlay.Invalidation in
            let current = self.current
            current.layers.forgetSpellings()
            swapMemo.withLock { $0 = SwapMemo() }
            let root = try current.layers.rootPlacement(index: indexWatch)
            defer { touchControlTime() }
            if subtree == nil, nodes.placement(of: rootNodeID) == root, let (seen, indexed) = watch.changes() {
                let changes = seen + nodeChanges(indexed + patchChangesOnDisk(current.layers))
                let (touched, replaced) = nodes.invalidate(changes: changes, watched: watch.watchedPlacements)
                watch.unwatch(replaced)
                current.directories.removeAll()
                return Overlay.Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false, exact: true)
            }
            if let names {
                // a layer's index reads the path again (everything: `restart` below)
                let path = LayerPath(bytes: Array(names.joined(separator: [UInt8(ascii: "/")])))
                for layer in current.layers.layers { layer.index?.forget(subtree: path) }
            }
            let before = nodes.generation.number
            let touched = nodes.invalidate(subtree: names, root: root, listingNames: listingNames)
            // every placement forgotten (a new generation): requests from now on pin a new view
            if nodes.generation.number != before {
                publishView(of: current.layers)
            } else {
                current.directories.removeAll()
            }
            if names == nil { watch.restart() }  // everything is resolved again, and watched anew
            return Overlay.Invalidation(entries: touched.entries, nodes: touched.nodes, swappedSubstitution: false)
        }
    }

    /// The changes made to the patches' directories their indexes read, where no watch
    /// reports them (see `LayerWatch.watchesIndexes`): found by the directories' change times.
    private func patchChangesOnDisk(_ layers: LayerStack) -> [LayerWatch.IndexedChange] {
        if watch.watchesIndexes { return [] }
        return layers.patches.flatMap { patch in patch.index.map { $0.changesOnDisk(of: patch) } ?? [] }
    }

    /// The changes seen in directories of patches' indexes, told to the indexes, as changes of
    /// the directory nodes at the same paths (a patch is not changed through the mount, so a
    /// path in it is the view's): a whiteout or the opaque marker as in `LayerWatch.parse`.
    private func nodeChanges(_ indexed: [LayerWatch.IndexedChange]) -> [LayerWatch.Change] {
        var changes: [LayerWatch.Change] = []
        for change in indexed {
            change.index.changed(change.path, name: change.name, isDirectory: change.isDirectory,
                                 structural: change.structural)
            guard let directory = nodes.directoryNode(at: change.path) else { continue }
            if change.name == Whiteout.opaqueMarker {
                changes.append(LayerWatch.Change(directory: directory, name: [], structural: true))
            } else if change.name.starts(with: Whiteout.reservedPrefix) {
                continue
            } else if let hidden = Whiteout.hiddenName(change.name) {
                changes.append(LayerWatch.Change(directory: directory, name: hidden, structural: true))
            } else {
                changes.append(LayerWatch.Change(directory: directory, name: change.name, structural: true))
            }
        }
        return changes
    }

    /// Waits until changes in the layers' directories the daemon uses have settled (no new
    /// change for `quiet` milliseconds, or `longest` after the first), or `idle` milliseconds
    /// without any; whether there are changes to invalidate (`-o watch`).
    func waitForSettledChanges(idle: Int32, quiet: Int32, longest: Int32) -> Bool {
        guard watch.waitForChanges(milliseconds: idle) else { return false }
        var seen = watch.pendingBytes()
        var waited: Int32 = 0
        while waited < longest {
            usleep(useconds_t(quiet) * 1000)
            waited += quiet
            let now = watch.pendingBytes()
            if now == seen { break }
            seen = now
        }
        return true
    }

    /// The names of a relative path as written to `.invalidate`; nil for the whole tree.
    static func pathNames(_ text: [UInt8]) throws(Errno) -> [[UInt8]]? {
        let names = text.split(separator: UInt8(ascii: "/")).map(Array.init).filter { $0 != [0x2E] }
        if names.isEmpty { return nil }
        for name in names { try Names.checkLookup(name) }
        return names
    }

    /// The directory at the substitution's path, opened, if it is no longer the one in use
    /// (swapped by rename, or removed and made anew); nil while the path names none.
    private func substitutionSwappedOnDisk() throws(Errno) -> Layer? {
        guard let path = substitutionPath else { return nil }
        var onDisk = stat()
        guard path.withCString({ stat($0, &onDisk) }) == 0 else { return nil }  // gone for now: keep serving the one we have
        guard let substitution = current.layers.substitution?.layer else { return nil }
        let open = try Sys.fstat(substitution.rootFD)
        if onDisk.st_dev == open.st_dev && onDisk.st_ino == open.st_ino { return nil }
        return try Layer(path: path, accessTimes: substitution.accessTimes, foldsNames: substitution.spellings != nil)
    }
}
