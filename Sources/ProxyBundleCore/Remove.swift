#if canImport(Glibc)
import Glibc
#endif
import CFuseShim

/// Removing and renaming names. When the main bundle has an entry of the removed name, the
/// whiteout is written first (the substitution's entry still wins beside it), then the
/// substitution's entry goes: the view changes in one step, and if the whiteout cannot be
/// written nothing changes at all.
extension Overlay {
    public func unlink(_ name: [UInt8], in parent: NodeID) throws(Errno) {
        let (dir, child) = try visibleChild(name, in: parent)
        if child.placement.isDirectory { throw Errno.isDirectory }
        try remove(name, in: parent, dir, child)
    }

    public func removeDirectory(_ name: [UInt8], in parent: NodeID) throws(Errno) {
        let (dir, child) = try visibleChild(name, in: parent)
        guard child.placement.isDirectory else { throw Errno.notDirectory }
        if try !mergedEntries(dir.path.appending(name), child.placement).isEmpty { throw Errno(ENOTEMPTY) }
        try remove(name, in: parent, dir, child)
    }

    private func visibleChild(_ name: [UInt8], in parent: NodeID) throws(Errno) -> (NodeTable.Location, Resolved) {
        try Names.checkLookup(name)
        if ControlFile(name: name, in: parent) != nil { throw Errno.notPermitted }
        let dir = try locate(parent)
        guard dir.placement.isDirectory else { throw Errno.notDirectory }
        return (dir, try resolve(name, in: dir.path, dir.placement))
    }

    private func remove(_ name: [UInt8], in parent: NodeID, _ dir: NodeTable.Location, _ child: Resolved) throws(Errno) {
        let hidesMain = try mainHas(name, in: dir)
        let dirPath = try upperDirectory(parent)
        try upper.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) in
            if hidesMain { try Whiteout.write(hiding: name, in: dirfd) }
            guard child.placement.inUpper else { return }
            do throws(Errno) {
                try removeUpperEntry(name, in: dirfd, isDirectory: child.placement.isDirectory)
            } catch {
                if hidesMain { try? Whiteout.remove(hiding: name, in: dirfd) }
                throw error
            }
        }
        nodes.detach(parent: parent, name: name)
    }

    /// Removes an entry of the substitution; a directory (which may still hold whiteouts) is
    /// first moved into the work directory, so it disappears in one step.
    private func removeUpperEntry(_ name: [UInt8], in dirfd: Int32, isDirectory: Bool) throws(Errno) {
        try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            if !isDirectory {
                _ = try Sys.check { unlinkat(dirfd, p, 0) }
                return
            }
            let work = try workspace()
            let temporary = work.temporaryName()
            try temporary.withCStringCopy { (tmp: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { pb_renameat2(dirfd, p, work.fd, tmp, pb_RENAME_NOREPLACE) }
            }
            try? Workspace.removeTree(temporary, in: work.fd)
        }
    }

    /// Whether the main bundle has an entry `name` in directory `dir` that removing or
    /// renaming the name must keep hidden.
    func mainHas(_ name: [UInt8], in dir: NodeTable.Location) throws(Errno) -> Bool {
        guard dir.placement.inLower else { return false }
        guard let st = try absentAsNil({ () throws(Errno) -> stat in try lower.attributes(dir.path.appending(name)) }) else {
            return false
        }
        return !Whiteout.isDevice(st)
    }

    /// rename(2) with RENAME_NOREPLACE. A file is copied up first. A directory can move when
    /// it lives only in the substitution; one with main-bundle content answers EXDEV for now
    /// (as overlayfs does without redirect_dir), so tools fall back to copying.
    public func rename(_ name: [UInt8], in parent: NodeID, to newName: [UInt8], in newParent: NodeID,
                       flags: UInt32) throws(Errno) {
        guard flags & ~pb_RENAME_NOREPLACE == 0 else { throw Errno.invalid }
        try Names.checkNew(newName)
        if ControlFile(name: newName, in: newParent) != nil { throw Errno.notPermitted }
        let (dir, source) = try visibleChild(name, in: parent)
        let newDir = try locate(newParent)
        guard newDir.placement.isDirectory else { throw Errno.notDirectory }
        let target = try absentAsNil { () throws(Errno) -> Resolved in try resolve(newName, in: newDir.path, newDir.placement) }
        if parent == newParent && name == newName { return }
        if let target {
            if flags & pb_RENAME_NOREPLACE != 0 { throw Errno(EEXIST) }
            try checkReplace(target, at: newDir.path.appending(newName), by: source)
        }
        if source.placement.isDirectory && source.placement.inLower { throw Errno(EXDEV) }
        if source.placement.isDirectory, let target, target.placement.isDirectory, target.placement.inUpper {
            throw Errno(EXDEV)  // replacing a substitution directory that may hold whiteouts
        }
        let hidesMainSource = try mainHas(name, in: dir)
        let hidesMainTarget = try mainHas(newName, in: newDir)
        if !source.placement.inUpper { try copyUpByName(name, in: parent) }
        let fromPath = try upperDirectory(parent)
        let toPath = try upperDirectory(newParent)
        try upper.withDirectory(fromPath) { (fromfd: Int32) throws(Errno) in
            try upper.withDirectory(toPath) { (tofd: Int32) throws(Errno) in
                if hidesMainSource { try Whiteout.write(hiding: name, in: fromfd) }
                if source.placement.isDirectory && hidesMainTarget {
                    // the moved directory must not merge with the main bundle's entry it lands on
                    try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in try Overlay.markOpaque(p, in: fromfd) }
                }
                do throws(Errno) {
                    try name.withCStringCopy { (from: UnsafePointer<CChar>) throws(Errno) in
                        try newName.withCStringCopy { (to: UnsafePointer<CChar>) throws(Errno) in
                            _ = try Sys.check { pb_renameat2(fromfd, from, tofd, to, flags) }
                        }
                    }
                } catch {
                    if hidesMainSource { try? Whiteout.remove(hiding: name, in: fromfd) }
                    throw error
                }
                if !source.placement.isDirectory { try? Whiteout.remove(hiding: newName, in: tofd) }
            }
        }
        nodes.move(parent: parent, name: name, to: newParent, newName)
    }

    private func checkReplace(_ target: Resolved, at path: LayerPath, by source: Resolved) throws(Errno) {
        switch (source.placement.isDirectory, target.placement.isDirectory) {
        case (true, false): throw Errno.notDirectory
        case (false, true): throw Errno.isDirectory
        case (true, true):
            if try !mergedEntries(path, target.placement).isEmpty { throw Errno(ENOTEMPTY) }
        case (false, false): break
        }
    }

    /// Copies up the entry `name` of `parent` when the kernel holds no node for it.
    private func copyUpByName(_ name: [UInt8], in parent: NodeID) throws(Errno) {
        let entry = try lookup(parent: parent, name: name)
        defer { forget(entry.node, count: 1) }
        try copyUp(entry.node)
    }
}
