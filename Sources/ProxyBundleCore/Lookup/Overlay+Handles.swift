#if canImport(Glibc)
import Glibc
#endif

/// File handles: the kernel encodes a node ID in a handle (`name_to_handle_at`, NFS), and
/// when it decodes one whose inode it no longer has, it looks up "." in that node; to connect
/// a directory to its path it looks up "..". Both are answered for every node whose file still
/// has a name, also one the kernel forgot (see `NodeTable.forget`).
extension Overlay {
    /// LOOKUP of "." in `id`: the node itself, with one more kernel reference, while its name
    /// leads to the same file; ESTALE for a node not known or without a name, or whose name now
    /// leads to another file or kind of entry.
    public func lookupItself(_ id: NodeID) throws(Errno) -> Entry {
        pinView(); defer { unpinView() }
        if let control = ControlFile(node: id) { return Entry(node: id, attributes: controlAttributes(control)) }
        guard nodes.addLookup(id) else { throw Errno.stale }
        do throws(Errno) {
            return Entry(node: id, attributes: try attributes(of: id))
        } catch {
            nodes.forget(id, count: 1)
            throw error.code == ENOENT || error.code == ENOTDIR ? Errno.stale : error
        }
    }

    /// LOOKUP of ".." in `id`: the directory its name is in (the root for the root).
    public func lookupParent(of id: NodeID) throws(Errno) -> Entry {
        if ControlFile(node: id) != nil || id == rootNodeID { return try lookupItself(rootNodeID) }
        guard let parent = nodes.parent(of: id), parent != NodeTable.detachedParent else { throw Errno.stale }
        return try lookupItself(parent)
    }
}
