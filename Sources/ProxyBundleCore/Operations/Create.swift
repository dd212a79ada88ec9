#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Creating names. A new entry is made in the substitution directory of its parent (copied
/// up first if needed). If a whiteout hid an entry of that name in a layer below, the new entry is
/// created beside it and the whiteout removed after: the substitution's entry wins while both
/// exist, so no moment shows neither or both. A new directory over a whiteout is made opaque
/// first, so it starts empty.
///
/// The folder `Operations/` owns the directory operations and attribute changes that write
/// the substitution (create, remove, rename, setattr, xattrs) and who may make them.
extension Overlay {
    /// What a new entry is.
    public enum NewEntry {
        case file(mode: mode_t, flags: Int32)
        case directory(mode: mode_t)
        case node(mode: mode_t, device: dev_t)
        case symlink(target: [UInt8])
    }

    /// Creates `name` in `parent` for the request's owner. For a file, also returns the open
    /// descriptor.
    public func create(_ request: Request, _ entry: NewEntry, named name: [UInt8],
                       in parent: NodeID) throws(Errno) -> (entry: Entry, fd: Int32?) {
        try request.changing { (change: borrowing Change) throws(Errno) -> (entry: Entry, fd: Int32?) in
            try create(request, change, entry, named: name, in: parent)
        }
    }

    private func create(_ request: Request, _ change: borrowing Change, _ entry: NewEntry, named name: [UInt8],
                        in parent: NodeID) throws(Errno) -> (entry: Entry, fd: Int32?) {
        let owner = request.owner
        try Names.checkNew(name)
        if ControlFile(name: name, in: parent) != nil { throw Errno(EEXIST) }
        try request.checkWritable(warn: warn)
        let dirPath = try copyUp.substitutionDirectory(request, change, parent)
        if (try? resolver.resolve(request, name, inNode: parent)) != nil { throw Errno(EEXIST) }
        // the reply describes the entry made, stat'ed through the same directory descriptor: a
        // path resolved again could meanwhile lead elsewhere (a rename of an ancestor), and a
        // reply of another file type makes the kernel fail the call with EIO
        let layer = try request.substitution
        var (fd, made) = try layer.withSpelledDirectory(dirPath) { (dirfd: Int32, spelledPath: LayerPath) throws(Errno) -> (Int32?, stat) in
            // where names fold, a whiteout device of another spelling holds the name: the entry
            // takes its place, and its spelling (a second spelling would be a second entry)
            let name = layer.spelling(of: name, in: spelledPath, at: dirfd) ?? name
            // where a whiteout device holds the name, the entry is made in the work directory
            // and then put in the device's place in one step
            let work = try Whiteout.deviceExists(name, in: dirfd) ? try request.workspace(warn: warn) : nil
            let whitedOut = try work != nil ? true : Whiteout.fileExists(hiding: name, in: dirfd)
            let group = Overlay.group(for: owner, under: try Sys.fstat(dirfd))
            let entry = Overlay.masked(entry, by: owner.umask, in: dirfd)
            let (at, madeName) = work.map { ($0.fd, $0.temporaryName()) } ?? (dirfd, name)
            return try madeName.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> (Int32?, stat) in
                let fd = try Overlay.make(entry, p, in: at)
                do throws(Errno) {
                    try Overlay.giveOwner(owner.uid, group, to: p, in: at)
                    if case .directory = entry, whitedOut {
                        try Overlay.markOpaque(p, in: at)
                    }
                    if work != nil {
                        try Overlay.replaceWhiteoutDevice(name, in: dirfd, by: p, in: at)
                    } else if whitedOut {
                        try Whiteout.remove(hiding: name, in: dirfd)
                    }
                    let made = if let fd { try Sys.fstat(fd) } else {
                        try name.withCStringCopy { (n: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(dirfd, n) }
                    }
                    return (fd, made)
                } catch {
                    // whole or nothing: the half-made entry goes again
                    if let fd { Sys.close(fd) }
                    Overlay.unmake(entry, p, in: at)
                    throw error
                }
            }
        }
        request.directories.added(name, in: parent)
        // a new inode may reuse the number of a removed copy: it shows its own
        if request.hasOrigins { request.dropOrigin(ofSubstitutionInode: made.st_ino) }
        made = request.shown(made)
        let isDirectory = (made.st_mode & S_IFMT) == S_IFDIR
        // nothing of the layers below shows through a new entry: a name visible there was
        // refused above, and a new directory over a whiteout is opaque
        let placement = Placement(top: 0, bottom: 0, isDirectory: isDirectory)
        let id = nodes.remember(parent: parent, name: name, placement: placement, kind: NodeTable.kind(of: made.st_mode),
                                identity: UInt64(made.st_ino), resolvedAt: nil, in: request.view.generation)
        if let fd { nodes.opened(id, fd: fd) }
        nodes.forgetOtherSpellings(request, changed: [parent], made: [(parent, name)])
        return (Entry(node: id, attributes: made), fd)
    }

    private static func make(_ entry: NewEntry, _ name: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) -> Int32? {
        switch entry {
        case .file(let mode, let flags):
            let passed = flags & pb_O_PASSED & ~O_TRUNC
            return try Sys.check { openat(dirfd, name, passed | O_CREAT | O_EXCL | pb_O_NOFOLLOW | pb_O_CLOEXEC, mode & 0o7777) }
        case .directory(let mode):
            _ = try Sys.check { mkdirat(dirfd, name, mode & 0o7777) }
        case .node(let mode, let device):
            let kind = mode & S_IFMT
            guard kind == S_IFREG || kind == S_IFIFO || kind == S_IFSOCK || kind == S_IFCHR || kind == S_IFBLK else {
                throw Errno.invalid
            }
            // a 0/0 character device would read as a whiteout
            if kind == S_IFCHR && device == 0 { throw Errno.notPermitted }
            _ = try Sys.check { mknodat(dirfd, name, mode, device) }
        case .symlink(let target):
            try target.withCStringCopy { (t: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { symlinkat(t, dirfd, name) }
            }
        }
        return nil
    }

    /// `entry` with the requester's umask applied to its mode, unless the directory `dirfd` has
    /// a default ACL, which the file system then applies instead, as for a process creating
    /// there itself. The daemon asks the kernel to leave the umask to it (FUSE_DONT_MASK); a
    /// mode stripped already (a kernel that did not agree) is left as it is, without a look
    /// for the ACL.
    static func masked(_ entry: NewEntry, by umask: mode_t, in dirfd: Int32) -> NewEntry {
        let mode: mode_t
        switch entry {
        case .file(let m, _), .directory(let m), .node(let m, _): mode = m
        case .symlink: return entry
        }
        let cleared = mode & ~(umask & 0o777)
        if cleared == mode { return entry }
        if let acl = try? Sys.getxattr(fd: dirfd, name: "system.posix_acl_default"), !acl.isEmpty { return entry }
        switch entry {
        case .file(_, let flags): return .file(mode: cleared, flags: flags)
        case .directory: return .directory(mode: cleared)
        case .node(_, let device): return .node(mode: cleared, device: device)
        case .symlink: return entry
        }
    }

    /// Puts the entry `temporary` of the work directory `workfd` in place of the whiteout
    /// device `name` of `dirfd`, in one step: a file replaces it, a directory trades places
    /// with it (a directory cannot replace a device), and the device then goes.
    static func replaceWhiteoutDevice(_ name: [UInt8], in dirfd: Int32, by temporary: UnsafePointer<CChar>,
                                      in workfd: Int32) throws(Errno) {
        let isDirectory = try Sys.lstatat(workfd, temporary).st_mode & S_IFMT == S_IFDIR
        try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            _ = try Sys.check { pb_renameat2(workfd, temporary, dirfd, p, isDirectory ? pb_RENAME_EXCHANGE : 0) }
        }
        if isDirectory { _ = unlinkat(workfd, temporary, 0) }
    }

    /// Links a new name `name` in the substitution directory `dirfd` with `link` (given the
    /// directory and the name to make) and removes the whiteout that hid the name: a `.wh.`
    /// file after the link, or a whiteout device, which the link made in the work directory
    /// replaces in one step.
    func linkAsNew(_ request: Request, _ change: borrowing Change, _ name: [UInt8], in dirfd: Int32,
                   _ link: (Int32, UnsafePointer<CChar>) throws(Errno) -> Void) throws(Errno) {
        guard try Whiteout.deviceExists(name, in: dirfd) else {
            try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in try link(dirfd, p) }
            if try Whiteout.fileExists(hiding: name, in: dirfd) { try Whiteout.remove(hiding: name, in: dirfd) }
            return
        }
        let work = try request.workspace(warn: warn)
        try work.temporaryName().withCStringCopy { (tmp: UnsafePointer<CChar>) throws(Errno) in
            try link(work.fd, tmp)
            do throws(Errno) {
                try Overlay.replaceWhiteoutDevice(name, in: dirfd, by: tmp, in: work.fd)
            } catch {
                _ = unlinkat(work.fd, tmp, 0)
                throw error
            }
        }
    }

    /// Removes an entry `make` made (a directory with the opaque marker it may have got).
    private static func unmake(_ entry: NewEntry, _ name: UnsafePointer<CChar>, in dirfd: Int32) {
        guard case .directory = entry else {
            _ = unlinkat(dirfd, name, 0)
            return
        }
        if let dir = try? Sys.openat2(dirfd, name, flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                      resolve: Layer.resolve) {
            _ = Whiteout.opaqueMarker.withCStringCopy { unlinkat(dir, $0, 0) }
            Sys.close(dir)
        }
        _ = unlinkat(dirfd, name, AT_REMOVEDIR)
    }

    /// Makes the requester own a new entry. chown clears set-user-ID and set-group-ID bits,
    /// so those are put back (and nothing is done when the owner is already right).
    private static func giveOwner(_ uid: uid_t, _ gid: gid_t, to name: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) {
        let st = try Sys.lstatat(dirfd, name)
        if st.st_uid == uid && st.st_gid == gid { return }
        _ = fchownat(dirfd, name, uid, gid, pb_AT_SYMLINK_NOFOLLOW)
        if st.st_mode & (S_ISUID | S_ISGID) != 0 && st.st_mode & S_IFMT != S_IFLNK {
            _ = fchmodat(dirfd, name, st.st_mode & 0o7777, 0)
        }
    }

    /// The group of a new entry: the directory's if it is set-group-ID (BSD semantics), else the owner's.
    static func group(for owner: Requester, under directory: stat) -> gid_t {
        directory.st_mode & S_ISGID != 0 ? directory.st_gid : owner.gid
    }

    /// Marks `directory` opaque. Its times stay as they were: the marker is a file made inside
    /// it, which would make its modification time now, where kernel overlayfs sets an
    /// attribute (which changes none).
    static func markOpaque(_ directory: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) {
        let dir = try Sys.openat2(dirfd, directory, flags: pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC,
                                  resolve: Layer.resolve)
        defer { Sys.close(dir) }
        let before = try Sys.fstat(dir)
        try Whiteout.opaqueMarker.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            let fd = try Sys.check { openat(dir, p, O_WRONLY | O_CREAT | pb_O_NOFOLLOW | pb_O_CLOEXEC, 0o644) }
            Sys.close(fd)
        }
        var times = [before.st_atim, before.st_mtim]
        _ = utimensat(dirfd, directory, &times, pb_AT_SYMLINK_NOFOLLOW)
    }

    /// A hard link `name` in `newParent` to `node`, which is copied up first.
    public func link(_ request: Request, _ node: NodeID, as name: [UInt8], in newParent: NodeID) throws(Errno) -> Entry {
        try request.changing { (change: borrowing Change) throws(Errno) -> Entry in
            try link(request, change, node, as: name, in: newParent)
        }
    }

    private func link(_ request: Request, _ change: borrowing Change, _ node: NodeID, as name: [UInt8],
                      in newParent: NodeID) throws(Errno) -> Entry {
        try Names.checkNew(name)
        if ControlFile(name: name, in: newParent) != nil { throw Errno(EEXIST) }
        try request.checkWritable(warn: warn)
        if try linkUnnamed(request, change, node, as: name, in: newParent) { return Entry(node: node, attributes: try attributes(request, of: node)) }
        let location = try resolver.locate(request, node)
        if location.placement.isDirectory { throw Errno.notPermitted }
        let source = try copyUp.copyUp(request, change, node)
        let dirPath = try copyUp.substitutionDirectory(request, change, newParent)
        if (try? resolver.resolve(request, name, inNode: newParent)) != nil { throw Errno(EEXIST) }
        try request.substitution.withDirectory(dirPath) { (dirfd: Int32) throws(Errno) in
            try request.substitution.withEntry(source) { (sourcefd: Int32) throws(Errno) in
                try linkAsNew(request, change, name, in: dirfd) { (at: Int32, p: UnsafePointer<CChar>) throws(Errno) in
                    _ = try Sys.check { linkat(sourcefd, "", at, p, pb_AT_EMPTY_PATH) }
                }
            }
        }
        request.directories.added(name, in: newParent)
        // the new name is the same node: the kernel then keeps one inode for both names
        nodes.addAlias(node, parent: newParent, name: name)
        nodes.forgetOtherSpellings(request, changed: [newParent], made: [(newParent, name)])
        return Entry(node: node, attributes: try attributes(request, of: node))
    }
}
