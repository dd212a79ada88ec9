#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Removing and renaming names. When a layer below the substitution shows an entry of the
/// removed name, the whiteout is written first (the substitution's entry still wins beside it), then the
/// substitution's entry goes: the view changes in one step, and if the whiteout cannot be
/// written nothing changes at all.
extension Overlay {
    public func unlink(_ request: Request, _ name: [UInt8], in parent: NodeID) throws(Errno) {
        try request.changing { (change: borrowing Change) throws(Errno) in
            let (dir, child) = try visibleChild(request, name, in: parent)
            if child.placement.isDirectory { throw Errno.isDirectory }
            try remove(request, change, name, in: parent, dir, child)
        }
    }

    public func removeDirectory(_ request: Request, _ name: [UInt8], in parent: NodeID) throws(Errno) {
        try request.changing { (change: borrowing Change) throws(Errno) in
            let (dir, child) = try visibleChild(request, name, in: parent)
            guard child.placement.isDirectory else { throw Errno.notDirectory }
            if try !lister.mergedEntries(request, dir.path.appending(name), child.placement).isEmpty { throw Errno(ENOTEMPTY) }
            try remove(request, change, name, in: parent, dir, child)
        }
    }

    func visibleChild(_ request: Request, _ name: [UInt8], in parent: NodeID) throws(Errno) -> (NodeTable.Location, Resolved) {
        try Names.checkLookup(name)
        if ControlFile(name: name, in: parent) != nil { throw Errno.notPermitted }
        let dir = try resolver.locate(request, parent)
        guard dir.placement.isDirectory else { throw Errno.notDirectory }
        return (dir, try resolver.resolve(request, name, in: dir.path, dir.placement))
    }

    private func remove(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in parent: NodeID,
                        _ dir: NodeTable.Location, _ child: Resolved) throws(Errno) {
        try request.checkWritable(warn: warn)
        let hidesBelow = try resolver.shownBelowSubstitution(request, name, in: parent, dir)
        let dirPath = try copyUp.substitutionDirectory(request, change, parent)
        let entry = removedEntry(request, name, in: parent, dir, child)
        do throws(Errno) {
            // the name as the layer serving it spells it, where names fold: the substitution's
            // own spelling, or the one a whiteout hides below
            let nodeName = name
            let name = child.spelling ?? name
            try request.substitution.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) in
                if hidesBelow && Whiteout.needsDevice(name) {
                    // the device takes the name itself: it replaces the substitution's entry in one step
                    if !child.placement.inSubstitution { return try Whiteout.writeDevice(name, in: dirfd) }
                    return try removeSubstitutionEntry(request, change, name, in: dirfd, isDirectory: child.placement.isDirectory,
                                                       leavingWhiteout: true)
                }
                if hidesBelow { try Whiteout.write(hiding: name, in: dirfd) }
                guard child.placement.inSubstitution else { return }
                do throws(Errno) {
                    try removeSubstitutionEntry(request, change, name, in: dirfd, isDirectory: child.placement.isDirectory)
                } catch {
                    if hidesBelow { try? Whiteout.remove(hiding: name, in: dirfd) }
                    throw error
                }
            }
            nodes.detach(parent: parent, name: nodeName, keeping: entry)
            nodes.forgetOtherSpellings(request, changed: [parent], gone: [(parent, nodeName)])
        } catch {
            if let entry { Sys.close(entry) }
            throw error
        }
    }

    /// An O_PATH descriptor of `child`, the entry `name` of `dir` about to lose that name, if
    /// the kernel has a node for it: the node keeps it once no name leads to it, so that its
    /// attributes stay readable (see `NodeTable.Extras.removedEntry`). Nil if it cannot be
    /// opened (the node then answers ESTALE, as before).
    func removedEntry(_ request: Request, _ name: [UInt8], in parent: NodeID, _ dir: NodeTable.Location, _ child: Resolved) -> Int32? {
        guard nodes.hasChild(parent, name) else { return nil }
        return try? request.layer(serving: child.placement).open(dir.path.appending(name), flags: pb_O_PATH)
    }

    /// Removes an entry of the substitution; a directory (which may still hold whiteouts) is
    /// first moved into the work directory, so it disappears in one step. With
    /// `leavingWhiteout`, a whiteout device takes its place in the same step (RENAME_WHITEOUT).
    func removeSubstitutionEntry(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in dirfd: Int32,
                                 isDirectory: Bool, leavingWhiteout: Bool = false) throws(Errno) {
        try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            if !isDirectory && !leavingWhiteout {
                _ = try Sys.check { unlinkat(dirfd, p, 0) }
                return
            }
            let work = try request.workspace(warn: warn)
            let temporary = work.temporaryName()
            let flags = pb_RENAME_NOREPLACE | (leavingWhiteout ? pb_RENAME_WHITEOUT : 0)
            try temporary.withCStringCopy { (tmp: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { pb_renameat2(dirfd, p, work.fd, tmp, flags) }
            }
            try? Workspace.removeTree(temporary, in: work.fd)
        }
    }
}
