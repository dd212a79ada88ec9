#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// getattr, readlink, access and statfs.
extension Overlay {
    public func attributes(_ request: Request, of node: NodeID) throws(Errno) -> stat {
        if let control = ControlFile(node: node) { return controlAttributes(control) }
        if let st = nodes.openFileAttributes(of: node, detachedOnly: true) { return request.shown(st) }
        do throws(Errno) {
            let location = try resolver.locate(request, node)
            let st = try attributes(request, of: node, at: location)
            guard location.kind == 0 || NodeTable.kind(of: st.st_mode) == location.kind else {
                // another kind of entry took the name (the kernel would mark the inode bad)
                if let st = nodes.openFileAttributes(of: node, detachedOnly: false) { return request.shown(st) }
                throw Errno.stale
            }
            return st
        } catch let error where error.code == ESTALE {
            // its name now leads elsewhere (found just now by `locate`), but it may still be open,
            // or still be where it was before the layers were swapped
            if let st = nodes.openFileAttributes(of: node, detachedOnly: true) { return request.shown(st) }
            guard let before = nodes.lastKnownLocation(of: node, in: request.view.generation),
                  let (fd, st) = openWhereItWas(request, before, flags: pb_O_PATH) else { throw error }
            Sys.close(fd)
            return request.shown(st)
        }
    }

    /// A directory's attributes come through the descriptor kept for its lookups when there is
    /// one (a read, like a lookup: see `DirectoryCache`), everything else's by path.
    private func attributes(_ request: Request, of node: NodeID, at location: NodeTable.Location) throws(Errno) -> stat {
        let placement = location.placement
        if cachesLookups, placement.isDirectory, let dirs = request.directories.cached(node, placement),
           let st = try dirs.attributes(in: Int(placement.top)) {
            return request.shown(st, placement)
        }
        return try request.attributes(at: location.path, placement)
    }

    public func readLink(_ request: Request, _ node: NodeID) throws(Errno) -> [UInt8] {
        if ControlFile(node: node) != nil { throw Errno.invalid }
        let location = try resolver.locate(request, node)
        return try request.layer(serving: location.placement).readLink(location.path)
    }

    /// The attributes of an open file, through its descriptor (also after its name was removed).
    public func attributes(_ request: Request, of node: NodeID, openFile fd: Int32) throws(Errno) -> stat {
        if let control = ControlFile(node: node) { return controlAttributes(control) }
        return request.shown(try Sys.fstat(fd))
    }

    /// The top layer's file system (the substitution's when there is one), as kernel overlayfs
    /// reports its upper one, or its first lower one without an upper: names of up
    /// to its limit work in every operation (a whiteout for a name too long for `.wh.` is a
    /// device, see `Whiteout.needsDevice`), never more than 255 bytes.
    public func fileSystemStatistics(_ request: Request) throws(Errno) -> statvfs {
        var result = try request.layers[0].fileSystemStatistics()
        result.f_namemax = min(result.f_namemax, UInt(Names.maximumLength))
        return result
    }

    /// access(2): checks `mask` against the node's mode for the request's caller.
    public func checkAccess(_ request: Request, _ node: NodeID, mask: Int32) throws(Errno) {
        let st = try attributes(request, of: node)
        try Permissions.check(st, mask: mask, user: request.caller)
    }
}
