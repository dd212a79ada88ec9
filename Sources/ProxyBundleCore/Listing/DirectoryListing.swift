#if canImport(Glibc)
import Glibc
#endif

/// A merged directory listing, taken once when the directory is opened so that offsets stay
/// valid across readdir calls (telldir/seekdir). Entry `i` has offset `i + 1`.
///
/// The folder `Listing/` owns readdir: the merge of a directory's layers into one list, the
/// list itself, and reading the attributes of what a listing names ahead of the lookups.
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
    public func checkDirectory(_ request: Request, _ node: NodeID) throws(Errno) {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        guard try locate(request, node).placement.isDirectory else { throw Errno.notDirectory }
    }

    /// The visible entries of directory `node`: "." and "..", then each layer's entries that no
    /// layer above shadows or whites out, top layer first. Each name once.
    public func listDirectory(_ request: Request, _ node: NodeID) throws(Errno) -> DirectoryListing {
        if ControlFile(node: node) != nil { throw Errno.notDirectory }
        let version = nodes.version
        let location = try locate(request, node)
        guard location.placement.isDirectory else { throw Errno.notDirectory }
        let directories = try request.directories.descriptors(node, location, located: version, layers: request.layers,
                                                           forReading: true)
        let own = try attributes(request, at: location.path, location.placement)
        let parentInode = node == rootNodeID ? own.st_ino : try attributes(request, of: location.parent).st_ino
        var list = EntryList()
        list.append([0x2E], type: UInt8(DT_DIR), inode: UInt64(own.st_ino))
        list.append([0x2E, 0x2E], type: UInt8(DT_DIR), inode: UInt64(parentInode))
        try mergeEntries(request, location.path, directories, into: &list)
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

    /// The visible entries of the directory at `path` (without "." and ".."), top layer first.
    func mergedEntries(_ request: Request, _ path: LayerPath, _ placement: Placement) throws(Errno) -> EntryList {
        var list = EntryList()
        try mergeEntries(request, path, placement, into: &list)
        return list
    }

    /// Appends the visible entries of the directory at `path` to `list`: each merged layer's
    /// entries whose names no layer above has or whites out, down to a layer where the
    /// directory is opaque.
    private func mergeEntries(_ request: Request, _ path: LayerPath, _ placement: Placement, into list: inout EntryList) throws(Errno) {
        let stack = request.layers
        var read: [Layer.Entries] = []
        for index in stack.indices(of: placement) {
            guard let entries = try absentAsNil({ () throws(Errno) -> EntryList in try entries(request, path, in: index) }) else { continue }
            read.append((index, entries))
        }
        merge(request, read, tables: stack.foldsNames ? read.map { SpellingTable($0.list) } : [], into: &list)
    }

    /// The entries of the directory at `path` in layer `index`: a patch's from its index
    /// (see `LayerIndex`), ENOENT where it has none.
    func entries(_ request: Request, _ path: LayerPath, in index: Int) throws(Errno) -> EntryList {
        let layer = request.layers[index]
        guard let watch = indexWatch, !request.layers.foldsNames, let layerIndex = layer.index else { return try layer.entries(path) }
        guard let record = try layerIndex.directory(path, of: layer, watch: watch) else { throw Errno.noEntry }
        return record.entries
    }

    /// The same for the directory open as `directories`: through them where they were opened
    /// for this listing (each layer's directory opened once), else by its path like every
    /// read (a directory moved away behind the daemon's back is never followed); where the
    /// directory was opened in the layers its parent's names said hold it, in those only: with
    /// thousands of layers, the others would cost a failed open each. What was read tells the
    /// directory's names, by layer, to its lookups (and, where names fold, how each layer
    /// spells them).
    private func mergeEntries(_ request: Request, _ path: LayerPath, _ directories: DirectoryDescriptors, into list: inout EntryList) throws(Errno) {
        let stack = request.layers
        let opened = directories.takeUnread()
        // only the layers that have the directory: with thousands of patches, most lack it
        var read: [Layer.Entries] = []
        for index in stack.indices(of: directories.placement) {
            if let record = directories.record(in: index) {
                read.append((index, record.entries))
                continue
            }
            let fd = directories[index]
            if (opened || directories.isFiltered) && fd < 0 || directories.lacks(index) { continue }
            guard let entries = try absentAsNil({ () throws(Errno) -> EntryList in
                try opened ? Layer.entries(of: fd) : stack[index].entries(path)
            }) else { continue }
            read.append((index, entries))
        }
        // where names fold, each layer's names by key, once for both uses
        let tables = stack.foldsNames ? read.map { SpellingTable($0.list) } : []
        for (offset, table) in tables.enumerated() {
            directories.learnSpellings(table, in: read[offset].layer)
        }
        directories.known?.learn(read, present: directories.present.count)
        merge(request, read, tables: tables, into: &list)
    }

    /// Merges `read`, the entries of each layer that has the directory, top first, into
    /// `list`. Where names fold, `tables` holds each layer's names by key (see `SpellingTable`).
    private func merge(_ request: Request, _ read: [Layer.Entries], tables: [SpellingTable], into list: inout EntryList) {
        let stack = request.layers
        let numbers = shownInodes(request)
        if stack.foldsNames {
            return Overlay.mergeFolded(read, tables: tables, of: stack, numbers, into: &list)
        }
        list.reserve(read.reduce(0) { $0 + $1.list.entries.count }, nameBytes: read.reduce(0) { $0 + $1.list.nameBytes })
        // names shown or whited out by the layers merged so far: none below shows them
        var taken = NameSet(capacity: read.dropLast().reduce(0) { $0 + $1.list.entries.count })
        Overlay.merge(read[...], of: stack, numbers, taken: &taken, into: &list)
    }

    /// Merges `lists` (the layers' entries, top first) into `list`. Recursive, so that every
    /// layer's names stay in place while the layers below are merged: `taken` points into them.
    private static func merge(_ lists: ArraySlice<Layer.Entries>, of stack: LayerStack, _ numbers: ShownInodes,
                              taken: inout NameSet, into list: inout EntryList) {
        guard let (first, layerList) = lists.first else { return }
        let device = stack[first].device
        layerList.withNames { names in
            var opaque = false
            for entry in layerList.entries {
                let name = names.name(entry)
                if entry.isWhiteoutDevice || Whiteout.hasPrefix(name) {
                    if name.elementsEqual(Whiteout.opaqueMarker) { opaque = true }
                    continue
                }
                if !taken.isEmpty && taken.contains(name) { continue }
                list.append(name, type: entry.type, inode: UInt64(numbers.number(ino_t(entry.inode), device: device)),
                            layer: first)
            }
            if opaque || lists.count == 1 { return }
            for entry in layerList.entries {
                let name = names.name(entry)
                if entry.isWhiteoutDevice {
                    taken.insert(name)
                } else if Whiteout.hasPrefix(name) {
                    if let hidden = Whiteout.hiddenName(name) { taken.insert(hidden) }
                } else {
                    taken.insert(name)
                }
            }
            merge(lists.dropFirst(), of: stack, numbers, taken: &taken, into: &list)
        }
    }

    /// `merge` where names fold (`-o casefold`, see `FoldedMerge` for the rules): names of one
    /// key are one entry, which the highest layer holding any spelling of it shows with its
    /// spelling; in a layer, the first spelling in byte order serves (a whiteout device too,
    /// which then hides the key); a `.wh.` file hides every spelling below. `tables` are each
    /// layer's names by key (`SpellingTable`, numbered as the layer's list): a few probes of
    /// them a name, nothing allocated for an ASCII name.
    private static func mergeFolded(_ read: [Layer.Entries], tables: [SpellingTable], of stack: LayerStack,
                                    _ numbers: ShownInodes, into list: inout EntryList) {
        // the keys the layers merged so far show or hide
        let above = read.dropLast()
        var taken = SpellingTable(capacity: above.reduce(0) { $0 + $1.list.entries.count },
                                  nameBytes: above.reduce(0) { $0 + $1.list.nameBytes }, sparse: true)
        for (offset, (layer, layerList)) in read.enumerated() {
            let device = stack[layer].device
            let table = tables[offset]
            let isLast = offset == read.count - 1
            let opaque = layerList.withNames { names -> Bool in
                var opaque = false
                var hidden: [UnsafeRawBufferPointer] = []
                let entries = layerList.entries
                let isWhiteoutFile = { (index: Int) -> Bool in
                    !entries[index].isWhiteoutDevice && Whiteout.hasPrefix(names.name(entries[index]))
                }
                for (index, entry) in entries.enumerated() {
                    let name = names.name(entry)
                    if isWhiteoutFile(index) {
                        if name.elementsEqual(Whiteout.opaqueMarker) {
                            opaque = true
                        } else if let hiddenName = Whiteout.hiddenName(name) {
                            hidden.append(hiddenName)
                        }
                        continue
                    }
                    // of several spellings in the layer, the first in byte order serves
                    guard index < table.count, table.firstEntry(keyOf: index, skipping: isWhiteoutFile) == index,
                          !taken.contains(keyOf: index, in: table) else { continue }
                    if !isLast { taken.add(entry: index, of: table) }
                    if entry.isWhiteoutDevice { continue }
                    list.append(name, type: entry.type, inode: UInt64(numbers.number(ino_t(entry.inode), device: device)),
                                layer: layer)
                }
                if !isLast { for name in hidden { taken.add(name) } }
                return opaque
            }
            if opaque { break }
        }
    }
}
