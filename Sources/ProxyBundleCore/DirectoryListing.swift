#if canImport(Glibc)
import Glibc
#endif

/// A merged directory listing, taken once when the directory is opened so that offsets stay
/// valid across readdir calls (telldir/seekdir). Entry `i` has offset `i + 1`.
public final class DirectoryListing: Sendable {
    public struct Item: Sendable {
        public var name: [UInt8]
        /// A `d_type` value.
        public var type: UInt8
        /// The inode number as the mount reports it.
        public var inode: UInt64
        /// Whether the entry was read from the substitution (else from the main bundle, where
        /// the substitution had neither the name nor a whiteout for it).
        var fromUpper = false
    }

    public let node: NodeID
    public let items: [Item]
    /// The directory as it was listed, and the node table's version then: while no name
    /// changed, an item's layer tells where its entry is (see `Overlay.lookup(listed:in:)`).
    let directories: DirectoryDescriptors
    let version: UInt64

    init(node: NodeID, items: [Item], directories: DirectoryDescriptors, version: UInt64) {
        self.node = node
        self.items = items
        self.directories = directories
        self.version = version
    }

    public static func isDotOrDotDot(_ name: [UInt8]) -> Bool {
        name == [0x2E] || name == [0x2E, 0x2E]
    }
}

extension Overlay {
    /// Checks that `node` is a directory that can be listed (opendir), without listing it.
    public func checkDirectory(_ node: NodeID) throws(Errno) {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        guard try locate(node).placement.isDirectory else { throw Errno.notDirectory }
    }

    /// The visible entries of directory `node`: "." and "..", then the substitution's entries,
    /// then the main bundle's entries that are neither shadowed nor whited out. Each name once.
    public func listDirectory(_ node: NodeID) throws(Errno) -> DirectoryListing {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        let version = nodes.version
        let location = try locate(node)
        guard location.placement.isDirectory else { throw Errno.notDirectory }
        let directories = try self.directories.descriptors(node, location, located: version, upper: upper, lower: lower)
        let own = try attributes(at: location.path, location.placement)
        let parentInode = node == rootNodeID ? own.st_ino : try attributes(of: location.parent).st_ino
        var items: [DirectoryListing.Item] = [
            .init(name: [0x2E], type: UInt8(DT_DIR), inode: UInt64(own.st_ino)),
            .init(name: [0x2E, 0x2E], type: UInt8(DT_DIR), inode: UInt64(parentInode)),
        ]
        let entries = try mergedEntries(location.path, location.placement)
        if node == rootNodeID {
            // the control files hide any entry of their name in the layers
            let controls = ControlFile.allCases
            items += entries.filter { item in !controls.contains { $0.name == item.name } }
            items += controls.map { .init(name: $0.name, type: UInt8(DT_REG), inode: UInt64($0.inode)) }
        } else {
            items += entries
        }
        return DirectoryListing(node: node, items: items, directories: directories, version: version)
    }

    /// The visible entries of the directory at `path` (without "." and ".."): the
    /// substitution's, then the main bundle's that are neither shadowed nor whited out.
    func mergedEntries(_ path: LayerPath, _ placement: Placement) throws(Errno) -> [DirectoryListing.Item] {
        var items: [DirectoryListing.Item] = []
        // names the substitution shows or whites out: the main bundle's are not listed
        var taken = Set<HashedName>()
        var opaque = false
        if placement.inUpper {
            let entries = try absentAsNil { () throws(Errno) -> [LayerEntry] in try upper.entries(path) } ?? []
            taken.reserveCapacity(entries.count)
            items.reserveCapacity(entries.count)
            for entry in entries {
                if entry.isWhiteoutDevice {
                    taken.insert(HashedName(entry.name))
                } else if Whiteout.hasPrefix(entry.name) {
                    if entry.name == Whiteout.opaqueMarker { opaque = true }
                    if let name = Whiteout.hiddenName(entry.name) { taken.insert(HashedName(name)) }
                } else {
                    taken.insert(HashedName(entry.name))
                    items.append(.init(name: entry.name, type: entry.type,
                                       inode: UInt64(shownInode(ino_t(entry.inode), inUpper: true)), fromUpper: true))
                }
            }
        }
        if placement.inLower && !opaque {
            let entries = try absentAsNil { () throws(Errno) -> [LayerEntry] in try lower.entries(path) } ?? []
            items.reserveCapacity(items.count + entries.count)
            for entry in entries {
                if entry.isWhiteoutDevice || Whiteout.hasPrefix(entry.name) { continue }
                if !taken.isEmpty && taken.contains(HashedName(entry.name)) { continue }
                items.append(.init(name: entry.name, type: entry.type,
                                   inode: UInt64(inodes.number(ino_t(entry.inode), inUpper: false))))
            }
        }
        return items
    }
}

/// A name as a set member, hashed in one call: `[UInt8]`'s own hash feeds the hasher one byte
/// at a time, which was 5% of the daemon's time listing a large merged directory.
struct HashedName: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
