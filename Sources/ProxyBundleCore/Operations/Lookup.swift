#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// lookup and forget: a name of a directory node to the node it names (see `Resolver`).
extension Overlay {
    /// Resolves `name` in `parent`, from the cache when it knows the answer.
    public func lookup(_ request: Request, parent: NodeID, name: [UInt8]) throws(Errno) -> Entry {
        switch try find(request, name, in: parent) {
        case .found(let entry): return entry
        case .absent: throw Errno.noEntry
        }
    }

    /// What `find` answers.
    public enum Found {
        case found(Entry)
        /// Missing; `remembered` tells whether the cache keeps that answer (so an
        /// invalidation can name it to the kernel).
        case absent(remembered: Bool)
    }

    /// A readdirplus entry: the lookup of `item` of `listing`.
    public func lookup(_ request: Request, listed item: DirectoryListing.Item, in listing: DirectoryListing) throws(Errno) -> Entry {
        switch try find(request, listing.name(item), in: listing.node, listed: (item, listing)) {
        case .found(let entry): return entry
        case .absent: throw Errno.noEntry
        }
    }

    /// Resolves `name` in `parent`, from the cache when it knows the answer. A name of a
    /// directory `listed` while no name changed since is looked for only where the listing
    /// found it.
    public func find(_ request: Request, _ name: [UInt8], in parent: NodeID,
                     listed: (item: DirectoryListing.Item, listing: DirectoryListing)? = nil) throws(Errno) -> Found {
        try Names.checkLookup(name)
        if let control = ControlFile(name: name, in: parent) {
            return .found(Entry(node: control.node, attributes: controlAttributes(control)))
        }
        switch cachesLookups ? nodes.cachedLookup(parent: parent, name: name, in: request.view.generation) : .unknown {
        case .absent:
            return .absent(remembered: true)
        case .found(let id, let location):
            let st = try? request.attributes(at: location.path, location.placement)
            if let st, NodeTable.kind(of: st.st_mode) == location.kind {
                return .found(Entry(node: id, attributes: st))
            }
            nodes.forget(id, count: 1)  // gone or changed on disk: resolve it again
        case .unknown:
            break
        }
        let resolvedAt = nodes.version
        do throws(Errno) {
            let found: Resolved
            if let listed, cachesLookups, listed.listing.version == resolvedAt {
                found = try resolver.resolve(request, listed: listed.item, of: listed.listing)
            } else {
                found = try resolver.resolve(request, name, in: try resolver.descriptors(request, of: parent, located: resolvedAt))
            }
            let id = nodes.remember(parent: parent, name: name, placement: found.placement,
                                    kind: NodeTable.kind(of: found.attributes.st_mode),
                                    identity: UInt64(found.attributes.st_ino), linkCount: Int(found.attributes.st_nlink),
                                    resolvedAt: resolvedAt, in: request.view.generation)
            return .found(Entry(node: id, attributes: found.attributes))
        } catch let error where error.code == ENOENT {
            nodes.dropForgotten(parent: parent, name: name, resolvedAt: resolvedAt)
            guard cachesLookups else { return .absent(remembered: false) }
            let (remembered, dropped) = nodes.rememberAbsent(parent: parent, name: name, resolvedAt: resolvedAt,
                                                             in: request.view.generation)
            if let dropped { request.keep(forgetting: [], names: dropped.map { ($0.parent, $0.name) }) }
            return .absent(remembered: remembered)
        }
    }

    public func forget(_ node: NodeID, count: UInt64) {
        nodes.forget(node, count: count)
    }
}
