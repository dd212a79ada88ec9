#if canImport(Glibc)
import Glibc
#endif
import CFuseShim

extension Overlay {
    /// The directory `node` is in and its name there (nil for the root, or a node no longer
    /// known).
    public func place(of node: NodeID) -> (parent: NodeID, name: [UInt8])? {
        guard node != rootNodeID, let location = try? nodes.location(of: node) else { return nil }
        return (location.parent, location.path.lastName)
    }

    /// Reads the subdirectory `name` of directory `parent` in each layer that has it, and the
    /// attributes of its entries, so that a walk about to list it finds them in the kernel's
    /// caches. Changes nothing, not even an access time where the daemon may avoid it, and
    /// remembers nothing: a failure just ends the warming.
    public func warmSubdirectory(_ name: [UInt8], of parent: NodeID) {
        guard let location = try? nodes.location(of: parent), location.placement.isDirectory else { return }
        let path = location.path.appending(name)
        for layer in [upper, lower] {
            guard let fd = try? layer.open(path, flags: O_RDONLY | pb_O_DIRECTORY, preservingAccessTime: true) else {
                continue
            }
            defer { Sys.close(fd) }
            try? Sys.readDirectory(fcntl(fd, F_DUPFD_CLOEXEC, 0)) { entry, _ in
                var st = stat()
                _ = fstatat(fd, directoryEntryName(entry), &st, AT_SYMLINK_NOFOLLOW)
            }
        }
    }
}
