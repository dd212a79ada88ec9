#if canImport(Glibc)
import Glibc
#endif

/// Locating a node: its placement in a request's view, found again where it went stale.
extension Resolver {
    /// A node's location in this request's view, resolving again whatever is stale along
    /// its path. ESTALE when its name no longer leads to the same kind of entry (or the same
    /// file); EPERM for a control file.
    func locate(_ request: Request, _ id: NodeID) throws(Errno) -> NodeTable.Location {
        if ControlFile(node: id) != nil { throw Errno.notPermitted }
        let generation = request.view.generation
        let location = try nodes.location(of: id, in: generation)
        if location.isFresh { return location }
        return try refresh(request, id, in: generation)
    }

    /// Resolves `id` again where it is stale, its ancestors first, and returns its location as
    /// resolved: the table keeps it only when `generation` is still the table's (a request
    /// that began before a swap uses what it resolved, and stores nothing).
    private func refresh(_ request: Request, _ id: NodeID, in generation: NodeTable.Generation) throws(Errno) -> NodeTable.Location {
        guard id != rootNodeID else { return try nodes.location(of: id, in: generation) }
        guard let (parent, name, fresh) = nodes.nameOf(id, in: generation), parent != NodeTable.detachedParent else {
            throw Errno.stale
        }
        let dir = try refreshed(request, parent, in: generation)
        if fresh, case let location = try nodes.location(of: id, in: generation), location.isFresh { return location }
        let found: Resolved
        do {
            found = try resolve(request, name, in: dir.path, dir.placement)
        } catch let error where error.code == ENOENT || error.code == ENOTDIR {
            nodes.detachName(of: id)
            throw Errno.stale
        }
        let kind = NodeTable.kind(of: found.attributes.st_mode)
        nodes.refresh(id, placement: found.placement, kind: kind, identity: UInt64(found.attributes.st_ino), in: generation)
        var location = try nodes.location(of: id, in: generation)
        if !location.isFresh {
            // not kept (another generation, or its ancestors went stale again meanwhile): what
            // was resolved just now serves this request
            guard location.kind == 0 || location.kind == kind else {
                throw Errno.stale
            }
            location.placement = found.placement
        }
        return location
    }

    /// The location of directory `id` for resolving its children: refreshed when stale.
    private func refreshed(_ request: Request, _ id: NodeID, in generation: NodeTable.Generation) throws(Errno) -> NodeTable.Location {
        let location = try nodes.location(of: id, in: generation)
        return location.isFresh ? location : try refresh(request, id, in: generation)
    }

}
