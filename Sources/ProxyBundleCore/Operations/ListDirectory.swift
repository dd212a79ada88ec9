#if canImport(Glibc)
import Glibc
#endif

/// opendir: the merged listing of a directory (kept by the FUSE server while it is open).
extension Overlay {
    /// Checks that `node` is a directory that can be listed (opendir), without listing it.
    public func checkDirectory(_ request: Request, _ node: NodeID) throws(Errno) {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        guard try resolver.locate(request, node).placement.isDirectory else { throw Errno.notDirectory }
    }

    /// The visible entries of directory `node`: "." and "..", then each layer's entries that no
    /// layer above shadows or whites out, top layer first. Each name once.
    public func listDirectory(_ request: Request, _ node: NodeID) throws(Errno) -> DirectoryListing {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        let version = nodes.version
        let location = try resolver.locate(request, node)
        guard location.placement.isDirectory else { throw Errno.notDirectory }
        let directories = try request.directories.descriptors(node, location, located: version, layers: request.layers,
                                                           forReading: true)
        let own = try request.attributes(at: location.path, location.placement)
        let parentInode = node == rootNodeID ? own.st_ino : try attributes(request, of: location.parent).st_ino
        var list = EntryList()
        list.append([0x2E], type: UInt8(DT_DIR), inode: UInt64(own.st_ino))
        list.append([0x2E, 0x2E], type: UInt8(DT_DIR), inode: UInt64(parentInode))
        try lister.mergeEntries(request, location.path, directories, into: &list)
        if let absent = nodes.absentNames(in: node) {
            // a name remembered as missing (the kernel may remember it too) is not listed until
            // an invalidation, though a layer gained it behind the daemon's back: a listing
            // never shows a name a lookup denies
            list.filter { _, name in !absent.contains(Array(name)) }
        }
        if node == rootNodeID {
            // the control files hide any entry of their name in the layers, and are not listed
            // themselves: a listing shows exactly the bundle (backups, manifests and signature
            // checks count its files); they are reached by name
            let controls = ControlFile.allCases
            list.filter { _, name in !controls.contains { $0.name.elementsEqual(name) } }
        }
        return DirectoryListing(node: node, list: list, directories: directories, version: version)
    }
}
