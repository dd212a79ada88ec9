#if canImport(Glibc)
import Glibc
#endif

/// A merged directory listing, taken once when the directory is opened so that offsets stay
/// valid across readdir calls (telldir/seekdir). Entry `i` has offset `i + 1`.
public final class DirectoryListing: Sendable {
    public typealias Item = EntryList.Entry

    public let node: NodeID
    public let list: EntryList
    /// The directory as it was listed, and the node table's version then: while no name
    /// changed, an item's layer tells where its entry is (see `Overlay.lookup(listed:in:)`).
    let directories: DirectoryDescriptors
    let version: UInt64

    init(node: NodeID, list: EntryList, directories: DirectoryDescriptors, version: UInt64) {
        self.node = node
        self.list = list
        self.directories = directories
        self.version = version
    }

    public var items: [Item] { list.entries }

    /// The name of `item`, copied.
    public func name(_ item: Item) -> [UInt8] { list.name(item) }

    /// The entries with their names, copied (for tests and tools, not the hot paths).
    public var named: [(name: [UInt8], item: Item)] { items.map { (name($0), $0) } }
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
        var list = EntryList()
        list.append([0x2E], type: UInt8(DT_DIR), inode: UInt64(own.st_ino))
        list.append([0x2E, 0x2E], type: UInt8(DT_DIR), inode: UInt64(parentInode))
        try mergeEntries(location.path, location.placement, into: &list)
        if node == rootNodeID {
            // the control files hide any entry of their name in the layers
            let controls = ControlFile.allCases
            list.filter { _, name in !controls.contains { $0.name.elementsEqual(name) } }
            for control in controls { list.append(control.name, type: UInt8(DT_REG), inode: UInt64(control.inode)) }
        }
        return DirectoryListing(node: node, list: list, directories: directories, version: version)
    }

    /// The visible entries of the directory at `path` (without "." and ".."): the
    /// substitution's, then the main bundle's that are neither shadowed nor whited out.
    func mergedEntries(_ path: LayerPath, _ placement: Placement) throws(Errno) -> EntryList {
        var list = EntryList()
        try mergeEntries(path, placement, into: &list)
        return list
    }

    /// Appends the visible entries of the directory at `path` to `list`.
    private func mergeEntries(_ path: LayerPath, _ placement: Placement, into list: inout EntryList) throws(Errno) {
        let upperEntries = placement.inUpper
            ? try absentAsNil { () throws(Errno) -> EntryList in try upper.entries(path) } ?? EntryList()
            : EntryList()
        let lowerEntries = placement.inLower
            ? try absentAsNil { () throws(Errno) -> EntryList in try lower.entries(path) } ?? EntryList()
            : EntryList()
        let numbers = shownInodes()
        list.reserve(upperEntries.entries.count + lowerEntries.entries.count,
                     nameBytes: upperEntries.nameBytes + lowerEntries.nameBytes)
        upperEntries.withNames { upperNames in
            // names the substitution shows or whites out: the main bundle's are not listed
            var taken = NameSet(capacity: upperEntries.entries.count)
            var opaque = false
            for entry in upperEntries.entries {
                let name = upperNames.name(entry)
                if entry.isWhiteoutDevice {
                    taken.insert(name)
                } else if Whiteout.hasPrefix(name) {
                    if name.elementsEqual(Whiteout.opaqueMarker) { opaque = true }
                    if let hidden = Whiteout.hiddenName(name) { taken.insert(hidden) }
                } else {
                    taken.insert(name)
                    list.append(name, type: entry.type, inode: UInt64(numbers.number(ino_t(entry.inode), inUpper: true)),
                                fromUpper: true)
                }
            }
            if opaque { return }
            lowerEntries.withNames { lowerNames in
                for entry in lowerEntries.entries {
                    let name = lowerNames.name(entry)
                    if entry.isWhiteoutDevice || Whiteout.hasPrefix(name) { continue }
                    if !taken.isEmpty && taken.contains(name) { continue }
                    list.append(name, type: entry.type, inode: UInt64(numbers.number(ino_t(entry.inode), inUpper: false)))
                }
            }
        }
    }
}
