#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Materializing a directory: its whole visible tree is copied into one opaque directory of
/// the substitution, which then holds everything the name shows. Renaming (or exchanging) a
/// directory with content in the layers below the substitution does this first, so the move
/// itself happens within the substitution and is portable (no overlayfs redirect). Cost: a
/// copy of every file of the tree served by a patch or the main bundle; the substitution's own
/// files are hard-linked into the copy.
extension CopyUp {
    /// Materializes directory `node` (nothing to do unless it reaches below the substitution). The
    /// copy is built in the work directory and exchanged with the substitution's directory in
    /// one step, so a crash leaves the old state or the new one. Only while no other change
    /// runs (`change.isAlone`): a change beneath it would be lost with the tree it replaces.
    func materialize(_ request: Request, _ change: borrowing Change, _ node: NodeID) throws(Errno) {
        let location = try resolver.locate(request, node)
        guard location.placement.isDirectory, location.placement.reachesBelowSubstitution, node != rootNodeID else { return }
        assert(change.isAlone, "a directory is materialized only while no other change runs")
        let parentPath = try substitutionDirectory(request, change, location.parent)
        let shown = try request.attributes(at: location.path, location.placement).st_ino
        let work = try request.workspace(warn: warn)
        let temporary = work.temporaryName()
        longCopies.withLock { $0.append(LongCopy(path: location.path.description)) }
        defer { longCopies.withLock { copies in copies.removeAll { $0.path == location.path.description } } }
        do throws(Errno) {
            try temporary.withCStringCopy { (tmp: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { mkdirat(work.fd, tmp, 0o700) }
                let copy = try Sys.openat2(work.fd, tmp, flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                           resolve: Layer.resolve)
                defer { Sys.close(copy) }
                try copyVisibleTree(request, location.path, location.placement, into: copy)
                try Overlay.markOpaque(".", in: copy)
                let serving = request.layer(serving: location.placement)
                let source = try serving.open(location.path, flags: O_RDONLY | pb_O_DIRECTORY)
                defer { Sys.close(source) }
                try Sys.applyMetadata(try serving.attributes(location.path), to: tmp, in: work.fd, from: source)
                try request.substitution.withDirectory(parentPath) { (dirfd: Int32) throws(Errno) in
                    try location.path.lastName.withCStringCopy { (name: UnsafePointer<CChar>) throws(Errno) in
                        let flags = location.placement.inSubstitution ? pb_RENAME_EXCHANGE : pb_RENAME_NOREPLACE
                        _ = try Sys.check { pb_renameat2(work.fd, tmp, dirfd, name, flags) }
                    }
                }
            }
        } catch {
            try? Workspace.removeTree(temporary, in: work.fd)
            throw error
        }
        if let copy = try? request.substitution.attributes(location.path) { request.recordOrigin(shown, forCopyInode: copy.st_ino) }
        // the substitution's directories beneath were replaced by copies, while their nodes
        // keep their placement: their descriptors lead into the originals. The table's
        // version moves on before the descriptors go and again after, so that no lookup that
        // began meanwhile stores what it found through one of them; only then does the old
        // tree (after an exchange, in the work directory) go: a lookup in it while it is
        // removed would find names missing that the copy holds, and the mount would remember
        // them missing (StressTests found it)
        nodes.update(node) { $0 = Placement(top: 0, bottom: 0, isDirectory: true) }
        request.directories.removeAll()
        nodes.markStale(under: node)
        try? Workspace.removeTree(temporary, in: work.fd)
        nodes.forgetOtherSpellings(request)
    }

    private func copyVisibleTree(_ request: Request, _ path: LayerPath, _ placement: Placement, into dirfd: Int32) throws(Errno) {
        let list = try lister.mergedEntries(request, path, placement)
        let dirs = try resolver.openDirectory(request, path, placement)
        for item in list.entries {
            try request.checkInterrupted()
            let itemName = list.name(item)
            let child = try resolver.resolve(request, itemName, in: dirs)
            let childPath = path.appending(itemName)
            let serving = request.layer(serving: child.placement)
            let st = try serving.attributes(childPath)
            noteCopied(st, under: path)
            try itemName.withCStringCopy { (name: UnsafePointer<CChar>) throws(Errno) in
                if !child.placement.isDirectory && child.placement.inSubstitution {
                    // the substitution's own files are linked, not copied: they keep their
                    // inode (hard links, open descriptors, inode numbers stay right)
                    return try request.substitution.withDirectory(path) { (source: Int32) throws(Errno) in
                        _ = try Sys.check { linkat(source, name, dirfd, name, 0) }
                    }
                }
                // the copy keeps showing the number the entry had
                let shown = request.shown(st).st_ino
                guard child.placement.isDirectory else {
                    let copy = try copyEntry(request, st, at: childPath, from: serving, to: name, in: dirfd)
                    // as for a copy-up: a file with other names shows a number of its own
                    if st.st_nlink == 1 { request.recordOrigin(shown, forCopyInode: copy) }
                    return
                }
                _ = try Sys.check { mkdirat(dirfd, name, 0o700) }
                let sub = try Sys.openat2(dirfd, name, flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                          resolve: Layer.resolve)
                defer { Sys.close(sub) }
                try copyVisibleTree(request, childPath, child.placement, into: sub)
                let source = try serving.open(childPath, flags: O_RDONLY | pb_O_DIRECTORY)
                defer { Sys.close(source) }
                try Sys.applyMetadata(st, to: name, in: dirfd, from: source)
                request.recordOrigin(shown, forCopyInode: try Sys.fstat(sub).st_ino)
            }
        }
    }

    /// One more entry of a directory being materialized (at or beneath `path`) was copied.
    private func noteCopied(_ st: stat, under path: LayerPath) {
        longCopies.withLock { copies in
            guard let index = copies.firstIndex(where: { path.description == $0.path || path.description.hasPrefix($0.path + "/") })
            else { return }
            copies[index].entries += 1
            if st.st_mode & S_IFMT == S_IFREG { copies[index].bytes += Int64(st.st_size) }
        }
    }
}

/// A long copy in progress (materializing a directory), for `.stats`.
public struct LongCopy: Sendable {
    /// The directory being copied, relative to the mount's root.
    public var path: String
    public var entries: Int = 0
    public var bytes: Int64 = 0
}
