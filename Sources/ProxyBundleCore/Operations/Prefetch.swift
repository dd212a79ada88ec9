#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// What the FUSE server's read-ahead (its Prefetcher) asks of the front: where a node is, and
/// the warming of a subdirectory a walk is about to list.
extension Overlay {
    /// The directory `node` is in and its name there (nil for the root, or a node no longer
    /// known).
    public func place(_ request: Request, of node: NodeID) -> (parent: NodeID, name: [UInt8])? {
        guard node != rootNodeID, let location = try? nodes.location(of: node, in: request.view.generation) else { return nil }
        return (location.parent, location.path.lastName)
    }

    /// The directory `node` is in (nil for the root or a node no longer known), without
    /// building its path as `place(of:)` does.
    public func parent(of node: NodeID) -> NodeID? {
        node == rootNodeID ? nil : nodes.parent(of: node)
    }

    /// Reads the subdirectory `name` of directory `parent` in each layer that has it, and the
    /// attributes of its entries, so that a walk about to list it finds them in the kernel's
    /// caches. Changes nothing, not even an access time where the daemon may avoid it, and
    /// remembers nothing: a failure just ends the warming.
    public func warmSubdirectory(_ request: Request, _ name: [UInt8], of parent: NodeID) {
        guard let location = try? nodes.location(of: parent, in: request.view.generation), location.placement.isDirectory else { return }
        let path = location.path.appending(name)
        let stack = request.layers
        let watch = stack.foldsNames ? nil : resolver.indexWatch
        let range = stack.indices(of: location.placement)
        // where the indexes tell, only the patches that have the directory: not every layer
        let tried = watch == nil ? nil : request.directories.indexedPatches(holding: path, layers: stack).map { holding in
            (stack.unindexed.map(Int.init) + holding).filter { range.contains($0) }.sorted()
        }
        for index in tried ?? Array(range) {
            let layer = stack[index]
            if let watch, let layerIndex = layer.index {
                // a patch's index has read the directory: its entries' attributes are read,
                // where it has it (thousands of thin patches lack it)
                guard let record = try? layerIndex.directory(path, of: layer, watch: watch), !record.entries.isEmpty,
                      let fd = try? layer.open(path, flags: pb_O_PATH | pb_O_DIRECTORY) else { continue }
                defer { Sys.close(fd) }
                record.entries.withNames { names in
                    for entry in record.entries.entries {
                        var st = stat()
                        _ = fstatat(fd, names.cString(entry), &st, AT_SYMLINK_NOFOLLOW)
                    }
                }
                continue
            }
            guard let fd = try? layer.open(path, flags: O_RDONLY | pb_O_DIRECTORY, preservingAccessTime: true) else {
                continue
            }
            defer { Sys.close(fd) }
            try? readDirectory(fd) { entry in
                var st = stat()
                _ = fstatat(fd, entry.name, &st, AT_SYMLINK_NOFOLLOW)
            }
        }
    }
}
