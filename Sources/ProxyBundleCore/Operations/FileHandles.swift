#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// File handles: the kernel encodes a node ID in a handle (`name_to_handle_at`, NFS), and
/// when it decodes one whose inode it no longer has, it looks up "." in that node; to connect
/// a directory to its path it looks up "..". Both are answered for every node whose file still
/// has a name, also one the kernel forgot (see `NodeTable.forget`).
extension Overlay {
    /// LOOKUP of "." in `id`: the node itself, with one more kernel reference, while its name
    /// leads to the same file; ESTALE for a node not known or without a name, or whose name now
    /// leads to another file or kind of entry.
    public func lookupItself(_ request: Request, _ id: NodeID) throws(Errno) -> Entry {
        if let control = ControlFile(node: id) { return Entry(node: id, attributes: controlAttributes(control)) }
        guard nodes.addLookup(id) else { throw Errno.stale }
        do throws(Errno) {
            return Entry(node: id, attributes: try attributes(request, of: id))
        } catch {
            nodes.forget(id, count: 1)
            throw error.code == ENOENT || error.code == ENOTDIR ? Errno.stale : error
        }
    }

    /// LOOKUP of ".." in `id`: the directory its name is in (the root for the root).
    public func lookupParent(_ request: Request, of id: NodeID) throws(Errno) -> Entry {
        if ControlFile(node: id) != nil || id == rootNodeID { return try lookupItself(request, rootNodeID) }
        guard let parent = nodes.parent(of: id), parent != NodeTable.detachedParent else { throw Errno.stale }
        return try lookupItself(request, parent)
    }

    /// Opens `node`'s file again when every name of it was removed but it is still open (its
    /// handle decoded by open_by_handle_at while a descriptor holds it: the kernel still has
    /// the inode), through the descriptor the node keeps; nil when the node has a name or
    /// nothing open. Only a substitution file may be written so; a patch's or the main
    /// bundle's answers ESTALE, as any change to it does.
    func openRemovedFile(_ request: Request, _ node: NodeID, flags: Int32) throws(Errno) -> OpenedFile? {
        let writes = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
        let opened = try nodes.withDetachedOpenFile(of: node) { (fd: Int32, placement: Placement) throws(Errno) -> OpenedFile in
            guard !writes || placement.inSubstitution, try Sys.fstat(fd).st_mode & S_IFMT == S_IFREG else {
                throw Errno.stale
            }
            let reopened = try Sys.withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Sys.check { open(proc, flags & pb_O_PASSED | pb_O_CLOEXEC) }
            }
            guard let st = try? Sys.fstat(reopened) else {
                Sys.close(reopened)
                throw Errno.stale
            }
            return OpenedFile(fd: reopened, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
        }
        guard let opened else { return nil }
        if writes {
            do throws(Errno) { try request.checkWritable(warn: warn) } catch {
                Sys.close(opened.fd)
                throw error
            }
        }
        nodes.opened(node, fd: opened.fd)
        return opened
    }
}
