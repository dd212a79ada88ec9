#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// O_TMPFILE: a file without a name, which `linkat` may name later. It is made in the work
/// directory, on the substitution's file system, so that nothing is copied up for a file that
/// may never be named; a link puts it in the substitution like any new name. In a directory
/// with a default ACL it is made in the directory's copy in the substitution, which gives it
/// what the ACL gives.
extension Overlay {
    /// A new unnamed file for the request's owner (opened with `flags`), to be named in
    /// `parent` if at all; its entry and the open descriptor.
    public func createUnnamed(_ request: Request, mode asked: mode_t, flags: Int32,
                              in parent: NodeID) throws(Errno) -> (entry: Entry, fd: Int32) {
        try request.changing { (change: borrowing Change) throws(Errno) -> (entry: Entry, fd: Int32) in
            try createUnnamed(request, change, mode: asked, flags: flags, in: parent)
        }
    }

    private func createUnnamed(_ request: Request, _ change: borrowing Change, mode asked: mode_t, flags: Int32,
                               in parent: NodeID) throws(Errno) -> (entry: Entry, fd: Int32) {
        let owner = request.owner
        try request.checkWritable(warn: warn)
        let directory = try attributes(request, of: parent)
        guard directory.st_mode & S_IFMT == S_IFDIR else { throw Errno.notDirectory }
        // O_EXCL: never to be named
        let opened = flags & pb_O_PASSED & ~O_TRUNC | flags & O_EXCL | pb_O_TMPFILE | pb_O_CLOEXEC
        let fd: Int32
        let mode: mode_t
        if try hasDefaultACL(request, parent) {
            // made in the directory's copy in the substitution, whose file system gives it the
            // mode and access ACL the default ACL makes (no umask), as kernel overlayfs does
            mode = asked
            let dirPath = try copyUp.substitutionDirectory(request, change, parent)
            fd = try request.substitution.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) -> Int32 in
                try Sys.check { openat(dirfd, ".", opened, mode & 0o7777) }
            }
        } else {
            // made in the work directory (nothing is copied up for a file that may never be
            // named), with the requester's umask
            mode = asked & ~(owner.umask & 0o777)
            let work = try request.workspace(warn: warn)
            fd = try Sys.check { openat(work.fd, ".", opened, mode & 0o7777) }
        }
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
        if request.hasOrigins { request.dropOrigin(ofSubstitutionInode: made.st_ino) }
        made = request.shown(made)
        let id = nodes.rememberUnnamed(placement: .file(in: 0),
                                       kind: NodeTable.kind(of: made.st_mode), identity: UInt64(made.st_ino))
        nodes.opened(id, fd: fd)
        return (Entry(node: id, attributes: made), fd)
    }

    /// Names an unnamed file `node` (made by `createUnnamed` and still open) `name` in
    /// `newParent`, in the substitution; false when `node` has a name. The kernel links only a
    /// file made with O_TMPFILE and without O_EXCL (else ENOENT).
    func linkUnnamed(_ request: Request, _ change: borrowing Change, _ node: NodeID, as name: [UInt8], in newParent: NodeID) throws(Errno) -> Bool {
        guard nodes.isUnnamed(node) else { return false }
        let dirPath = try copyUp.substitutionDirectory(request, change, newParent)
        if (try? resolver.resolve(request, name, inNode: newParent)) != nil { throw Errno(EEXIST) }
        let linked: Void? = try nodes.withDetachedOpenFile(of: node) { (fd: Int32, placement: Placement) throws(Errno) in
            guard placement.inSubstitution else { throw Errno.noEntry }
            try request.substitution.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) in
                try linkAsNew(request, change, name, in: dirfd) { (at: Int32, p: UnsafePointer<CChar>) throws(Errno) in
                    try Sys.link(fd, as: p, in: at)
                }
            }
        }
        guard linked != nil else { throw Errno.noEntry }
        request.directories.added(name, in: newParent)
        nodes.addAlias(node, parent: newParent, name: name)
        nodes.forgetOtherSpellings(request, changed: [newParent], made: [(newParent, name)])
        return true
    }

    /// Whether directory `node`, as shown, has a default ACL (which new entries in it inherit).
    private func hasDefaultACL(_ request: Request, _ node: NodeID) throws(Errno) -> Bool {
        do {
            return try !extendedAttribute(request, node, name: Array("system.posix_acl_default".utf8)).isEmpty
        } catch let error where [ENODATA, ENOTSUP, EOPNOTSUPP].contains(error.code) {
            return false
        }
    }
}
