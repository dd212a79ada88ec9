#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The merged entries of a directory: each layer's entries that no layer above shadows or
/// whites out, top layer first, each name once, with the inode numbers the mount shows. A
/// patch's entries come from its index where it has one (see `LayerIndex`). It keeps no state
/// of its own.
///
/// The folder `Listing/` owns readdir: this type, and the listing an open directory keeps
/// (`DirectoryListing`, which also reads its files' data ahead). The front's operations that
/// list a directory or warm a subdirectory are in Operations/ (ListDirectory.swift,
/// Prefetch.swift).
final class Lister: Sendable {
    /// The watch that patches' indexes are read with, nil where nothing is cached
    /// (`-o nocache`): see `LayerIndex`.
    let indexWatch: LayerWatch?

    init(indexWatch: LayerWatch?) {
        self.indexWatch = indexWatch
    }
}

extension Lister {
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
    func mergeEntries(_ request: Request, _ path: LayerPath, _ directories: DirectoryDescriptors, into list: inout EntryList) throws(Errno) {
        let stack = request.layers
        let opened = directories.takeUnread()
        // only the layers that have the directory: with thousands of patches, most lack it
        var read: [Layer.Entries] = []
        for index in directories.listedLayers() {
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
        let numbers = request.shownInodes()
        if stack.foldsNames {
            return Lister.mergeFolded(read, tables: tables, of: stack, numbers, into: &list)
        }
        list.reserve(read.reduce(0) { $0 + $1.list.entries.count }, nameBytes: read.reduce(0) { $0 + $1.list.nameBytes })
        // names shown or whited out by the layers merged so far: none below shows them
        var taken = NameSet(capacity: read.dropLast().reduce(0) { $0 + $1.list.entries.count })
        Lister.merge(read[...], of: stack, numbers, taken: &taken, into: &list)
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
