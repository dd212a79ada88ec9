#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// open and release of files (directories: `listDirectory`); created files: Create.swift.
extension Overlay {
    /// A file opened by `openFile`: the descriptor (the caller owns it) and which file of
    /// its layer it is.
    public struct OpenedFile: Sendable {
        public var fd: Int32
        public var device: UInt64
        public var inode: UInt64
    }

    /// Opens the file behind `node`. Opening a main-bundle file for writing (or with O_TRUNC)
    /// copies it up first.
    public func openFile(_ request: Request, _ node: NodeID, flags: Int32) throws(Errno) -> OpenedFile {
        if let opened = try openRemovedFile(request, node, flags: flags) { return opened }
        var location: NodeTable.Location
        do {
            location = try resolver.locate(request, node)
        } catch let error where error.code == ESTALE {
            // the layers were swapped since the kernel looked the name up, and the name leads
            // to another file now: the file the kernel holds is still served, for reading
            guard flags & O_ACCMODE == O_RDONLY, flags & O_TRUNC == 0,
                  let before = nodes.lastKnownLocation(of: node, in: request.view.generation),
                  let (fd, st) = openWhereItWas(request, before, flags: flags & pb_O_PASSED) else { throw error }
            nodes.opened(node, fd: fd)
            return OpenedFile(fd: fd, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        }
        if location.placement.isDirectory { throw Errno.isDirectory }
        let writes = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
        if writes && !location.placement.inSubstitution {
            location = try request.changing { (change: borrowing Change) throws(Errno) -> NodeTable.Location in
                try copyUp.copyUp(request, change, node, withData: flags & O_TRUNC == 0)
                return try resolver.locate(request, node)
            }
        }
        if writes { try request.checkWritable(warn: warn) }
        let fd = try request.layer(serving: location.placement).open(location.path, flags: flags & pb_O_PASSED)
        // a rename may have put a directory at the path since the kernel's lookup (a symlink
        // fails to open): its attributes for this inode would make the kernel mark the inode
        // bad (EIO); ESTALE makes the kernel look the name up again instead
        guard let st = try? Sys.fstat(fd), location.kind == 0 || NodeTable.kind(of: st.st_mode) == location.kind else {
            Sys.close(fd)
            throw Errno.stale
        }
        nodes.opened(node, fd: fd)
        return OpenedFile(fd: fd, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// Opens `node`'s file with `flags` where it still is after the layers were swapped (only
    /// then): at its path in the layer that served it, found by the view it was last resolved
    /// in (`Views.layer(numbered:in:)`: a patch is never changed through the mount). Only the
    /// very file the node is (its identity) is found. Nil when it is found nowhere.
    func openWhereItWas(_ request: Request, _ location: NodeTable.Location, flags: Int32) -> (fd: Int32, attributes: stat)? {
        guard !location.placement.isDirectory, location.identity != 0, location.resolvedIn != 0 else { return nil }
        // only across a swap of the layers since the node was resolved: a name hidden or
        // removed in the same layers leads nowhere, as on any file system
        guard views.recent.contains(where: { $0.generation.number >= location.resolvedIn }),
              let layer = views.layer(numbered: location.placement.top, in: location.resolvedIn),
              let fd = try? layer.open(location.path, flags: flags) else { return nil }
        if let st = try? Sys.fstat(fd), NodeTable.kind(of: st.st_mode) == location.kind,
           UInt64(request.shown(st).st_ino) == location.identity {
            return (fd, st)
        }
        Sys.close(fd)
        return nil
    }

    /// The kernel's inode of `node` cannot serve the file its name leads to now: the name is
    /// taken away from the node, so that after an ESTALE the kernel looks it up again and gets
    /// a new node (and inode).
    public func detachName(of node: NodeID) {
        nodes.detachName(of: node)
    }

    /// The kernel closed its last use of `fd`, opened by `openFile` or `create` for `node`.
    public func release(_ node: NodeID, fd: Int32) {
        if !nodes.closed(node, fd: fd) { Sys.close(fd) }
    }
}
