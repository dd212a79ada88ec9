#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// O_TMPFILE: a file without a name, which `linkat` may name later. It is made in the work
/// directory, on the substitution's file system, so that nothing is copied up for a file that
/// may never be named; a link puts it in the substitution like any new name.
extension Overlay {
    /// A new unnamed file for `owner` (opened with `flags`), to be named in `parent` if at all;
    /// its entry and the open descriptor.
    public func createUnnamed(mode: mode_t, flags: Int32, in parent: NodeID,
                              owner: Requester) throws(Errno) -> (entry: Entry, fd: Int32) {
        layersInUse.lockShared(); defer { layersInUse.unlockShared() }
        try checkWritable()
        let directory = try attributes(of: parent)
        guard directory.st_mode & S_IFMT == S_IFDIR else { throw Errno.notDirectory }
        let work = try workspace()
        // O_EXCL: never to be named
        let opened = flags & pb_O_PASSED & ~O_TRUNC | flags & O_EXCL | pb_O_TMPFILE | pb_O_CLOEXEC
        // made in the work directory, the file gets the requester's umask, not the default ACL
        // a directory it is linked into may have
        let mode = mode & ~(owner.umask & 0o777)
        let fd = try Sys.check { openat(work.fd, ".", opened, mode & 0o7777) }
        var made: stat
        do throws(Errno) {
            // chown clears the set-ID bits, which are put back
            _ = fchown(fd, owner.uid, Overlay.group(for: owner, under: directory))
            if mode & (S_ISUID | S_ISGID) != 0 { _ = fchmod(fd, mode & 0o7777) }
            made = try Sys.fstat(fd)
        } catch {
            Sys.close(fd)
            throw error
        }
        if hasOrigins { dropOrigin(ofSubstitutionInode: made.st_ino) }
        made = shown(made)
        let id = nodes.rememberUnnamed(placement: .file(in: 0),
                                       kind: NodeTable.kind(of: made.st_mode), identity: UInt64(made.st_ino))
        nodes.opened(id, fd: fd)
        return (Entry(node: id, attributes: made), fd)
    }

    /// Names an unnamed file `node` (made by `createUnnamed` and still open) `name` in
    /// `newParent`, in the substitution; false when `node` has a name. The kernel links only a
    /// file made with O_TMPFILE and without O_EXCL (else ENOENT).
    func linkUnnamed(_ node: NodeID, as name: [UInt8], in newParent: NodeID) throws(Errno) -> Bool {
        guard nodes.isUnnamed(node) else { return false }
        let dirPath = try substitutionDirectory(newParent)
        if (try? resolve(name, inNode: newParent)) != nil { throw Errno(EEXIST) }
        let linked: Void? = try nodes.withDetachedOpenFile(of: node) { (fd: Int32, placement: Placement) throws(Errno) in
            guard placement.inSubstitution else { throw Errno.noEntry }
            try substitution.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) in
                try Sys.withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) in
                    try linkAsNew(name, in: dirfd) { (at: Int32, p: UnsafePointer<CChar>) throws(Errno) in
                        _ = try Sys.check { linkat(AT_FDCWD, proc, at, p, AT_SYMLINK_FOLLOW) }
                    }
                }
            }
        }
        guard linked != nil else { throw Errno.noEntry }
        directories.added(name, in: newParent)
        nodes.addAlias(node, parent: newParent, name: name)
        return true
    }
}
