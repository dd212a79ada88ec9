#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Resolving a name, as overlayfs's namei (see `Resolver`).
extension Resolver {
    /// Resolves `name` in the directory at `dir` (see `resolve(_:in:layers:)`).
    func resolve(_ request: Request, _ name: [UInt8], in dir: LayerPath, _ dirPlacement: Placement) throws(Errno) -> Resolved {
        try resolve(request, name, in: openDirectory(request, dir, dirPlacement))
    }

    /// The descriptors of the directory at `path` merged by `placement`, not kept: opened only
    /// in the layers that have the directory, as the patches' indexes and the view's map of it
    /// tell (see `DirectoryCache.holders`), never a look at each of thousands of patches.
    func openDirectory(_ request: Request, _ path: LayerPath, _ placement: Placement,
                       forReading: Bool = false) throws(Errno) -> DirectoryDescriptors {
        let directories = request.directories
        let located = nodes.version
        let mapped = indexWatch == nil ? nil : try directories.mapped(path, placement, layers: request.layers, located: located)
        let holding = indexWatch == nil ? nil : try directories.holders(path, layers: request.layers, located: located)
        return try DirectoryDescriptors(path, placement, layers: request.layers, index: indexWatch, holding: holding,
                                        forReading: forReading, mapped: mapped)
    }

    /// Resolves `name` in directory node `parent` through the descriptors kept for it (see
    /// `DirectoryCache`): for checks before a change, which itself goes by path.
    func resolve(_ request: Request, _ name: [UInt8], inNode parent: NodeID) throws(Errno) -> Resolved {
        try resolve(request, name, in: descriptors(request, of: parent, located: nodes.version))
    }

    /// The descriptors of directory node `parent`: those kept for it (which need no path, as
    /// every invalidation drops them), or opened at its location. `located` is the table's
    /// version before.
    func descriptors(_ request: Request, of parent: NodeID, located: UInt64) throws(Errno) -> DirectoryDescriptors {
        if let placement = nodes.placement(of: parent), let kept = request.directories.cached(parent, placement) { return kept }
        let dir = try locate(request, parent)
        guard dir.placement.isDirectory else { throw Errno.notDirectory }
        return try request.directories.descriptors(parent, dir, located: located, layers: request.layers)
    }

    /// Resolves a listed `item` in the directory it was listed from, while nothing changed
    /// since: the listing found nothing of its name, and no whiteout for it, in the layers
    /// above the item's. A non-directory, or a directory of the lowest layer the listing
    /// merged, is one `fstatat` away; a directory above that may merge those below it.
    func resolve(_ request: Request, listed item: DirectoryListing.Item, of listing: DirectoryListing) throws(Errno) -> Resolved {
        let dirs = listing.directories
        let layer = Int(item.layer)
        let below = layer ..< Int(dirs.placement.bottom) + 1
        guard dirs.has(layer), dirs.hasOneDirectory(in: layer), !(below.count > 1 && item.type == UInt8(DT_DIR)) else {
            return try resolve(request, listing.name(item), in: dirs, layers: below)
        }
        let name = listing.name(item)
        let st = try listing.list.withNames { (names) throws(Errno) -> stat in try dirs.attributes(of: name, names.cString(item), in: layer) }
        if Whiteout.isDevice(st) || (below.count > 1 && isDirectory(st)) {
            return try resolve(request, listing.name(item), in: dirs, layers: below)
        }
        return Resolved(placement: Placement(top: layer, bottom: layer, isDirectory: isDirectory(st)), attributes: request.shown(st))
    }

    /// Resolves `name` in the directory open as `dirs`, through its layers top first (or only
    /// `layers`): the first layer with an entry of the name serves it, unless a whiteout hides
    /// it (a 0/0 device of the name, or a `.wh.` file in a layer above); a directory merges
    /// the directories of the name in the layers below, until one of them is opaque (its
    /// marker, its attribute, or a `.wh.` file beside it) or a layer has another kind of entry
    /// or a whiteout there. One `fstatat` per layer that has the directory; a look for a
    /// whiteout file or an opaque directory only once a layer below has the name.
    func resolve(_ request: Request, _ name: [UInt8], in dirs: DirectoryDescriptors, layers: Range<Int>? = nil) throws(Errno) -> Resolved {
        // where the directory's names were read: the layers that hold the name, and the
        // substitution (see `KnownNames`); none, and it is missing
        let holding = dirs.known?.holding(name, readingIn: layers == nil ? dirs : nil)
        if layers == nil, holding?.entries.isEmpty == true { throw Errno.noEntry }
        let searched = layers ?? dirs.placement.layers
        return try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Resolved in
            var found: Resolved? = nil
            var anyEntry = false
            // layers passed since the entry last taken (its own included), whose `.wh.` files
            // would hide what lies below them
            var unchecked = searched.lowerBound
            // below a directory found, the view's map of that directory, where many patches
            // have it (see `NameMap`): which of them have it, and where it is opaque, without
            // a look at each one's record (1,700 patches hold a top directory of 10,000 thin ones)
            var below: NameMap.Directory?? = nil
            func belowMap() throws(Errno) -> NameMap.Directory? {
                if below == nil { below = .some(try directoryMap(request, dirs.path.appending(name))) }
                return below ?? nil
            }
            for layer in Resolver.candidates(searched, holding?.entries, dirs) {
                guard dirs.has(layer) else { continue }
                if found != nil, dirs.isIndexed(layer), try belowMap()?.maps(layer) == true {
                    anyEntry = true  // a directory there (the map says so)
                } else if found != nil, let record = dirs.record(in: layer) {
                    // below the layer serving a directory, a patch's record tells what its
                    // entry is: no need for its attributes
                    guard let type = record.holding(name).type else { continue }
                    anyEntry = true
                    if type != UInt8(DT_DIR) { break }
                } else {
                    guard let (st, spelling) = try Resolver.attributes(of: name, p, in: dirs, layer) else { continue }
                    anyEntry = true
                    if Whiteout.isDevice(st) { break }
                    if found != nil && !isDirectory(st) { break }
                    if found == nil {
                        if try Resolver.whitesOut(name, dirs, unchecked ..< layer, holding?.whiteouts) { break }
                        guard isDirectory(st) else {
                            return Resolved(placement: .file(in: layer), attributes: request.shown(st), spelling: spelling)
                        }
                        found = Resolved(placement: Placement(top: layer, bottom: layer, isDirectory: true),
                                         attributes: request.shown(st), spelling: spelling)
                        unchecked = layer
                        continue
                    }
                }
                // a directory found above: this layer's directory merges, unless hidden
                if try Resolver.whitesOut(name, dirs, unchecked ..< layer, holding?.whiteouts) { break }
                if let bottom = found.map({ Int($0.placement.bottom) }) {
                    if let map = below ?? nil, map.maps(bottom) {
                        if map.isOpaque(bottom) { break }
                    } else if try isOpaqueDirectory(request, name, p, in: dirs, bottom) {
                        break
                    }
                }
                found?.placement.bottom = UInt16(layer)
                unchecked = layer
            }
            guard var found else {
                if !anyEntry && layers == nil { dirs.known?.missed(dirs) }
                throw Errno.noEntry
            }
            if found.placement.top != found.placement.bottom { found.attributes.st_nlink = 1 }
            return found
        }
    }

    /// The attributes of the entry `name` (also as `p`) of layer `layer` in the directory open
    /// as `dirs`, and where names fold, the layer's spelling of it (else nil); nil where it
    /// has none.
    private static func attributes(of name: [UInt8], _ p: UnsafePointer<CChar>, in dirs: DirectoryDescriptors,
                                   _ layer: Int) throws(Errno) -> (stat, [UInt8]?)? {
        // a patch's record says whether it has the name at all
        if let record = dirs.record(in: layer), record.holding(name).type == nil { return nil }
        guard dirs.foldsNames else {
            return try absentAsNil { () throws(Errno) -> stat in try dirs.attributes(of: name, p, in: layer) }.map { ($0, nil) }
        }
        guard let spelled = dirs.spelled(name, in: layer) else { return nil }
        return try absentAsNil { () throws(Errno) -> stat in
            try spelled.name.withCStringCopy { (s: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(spelled.fd, s) }
        }.map { ($0, spelled.name) }
    }

    /// The layers of `searched` to look in, top first: those that have the directory, or,
    /// where the directory's names were read, the substitution and those that hold the name.
    private static func candidates(_ searched: Range<Int>, _ holding: [UInt16]?, _ dirs: DirectoryDescriptors) -> [Int] {
        guard let holding else { return dirs.present.filter { searched.contains($0) } }
        let below = holding.lazy.map(Int.init).filter { $0 > 0 && searched.contains($0) }
        return (searched.contains(0) ? [0] : []) + below
    }

    /// Whether a layer of `range` that has the directory holds a whiteout file for `name`:
    /// the substitution looked at, and the others too unless the directory's names say which
    /// (`whiteouts`).
    private static func whitesOut(_ name: [UInt8], _ dirs: DirectoryDescriptors, _ range: Range<Int>,
                                  _ whiteouts: [UInt16]?) throws(Errno) -> Bool {
        if let whiteouts {
            if range.contains(0), dirs.has(0), try hasWhiteoutFile(hiding: name, dirs, 0) { return true }
            return whiteouts.contains { $0 > 0 && range.contains(Int($0)) }
        }
        for layer in dirs.present where range.contains(layer) {
            if try hasWhiteoutFile(hiding: name, dirs, layer) { return true }
        }
        return false
    }

    /// Whether layer `layer` of the directory open as `dirs` has a `.wh.` file for `name` (of
    /// any spelling, where names fold).
    private static func hasWhiteoutFile(hiding name: [UInt8], _ dirs: DirectoryDescriptors, _ layer: Int) throws(Errno) -> Bool {
        if let record = dirs.record(in: layer) { return record.holding(name).whiteout }
        guard dirs.foldsNames else { return try Whiteout.fileExists(hiding: name, in: dirs[layer]) }
        return dirs.spelled(Whiteout.fileName(hiding: name), in: layer) != nil
    }

    /// The view's map of the directory at `path` (see `NameMap`), of every patch that has it,
    /// where patches are indexed and many have it; nil otherwise.
    private func directoryMap(_ request: Request, _ path: LayerPath) throws(Errno) -> NameMap.Directory? {
        guard indexWatch != nil else { return nil }
        let all = Placement(top: 0, bottom: request.layers.mainIndex, isDirectory: true)
        return try request.directories.mapped(path, all, layers: request.layers, located: nodes.version)
    }

    /// Whether the directory `name` (also as `p`) of layer `layer` of `dirs` hides the layers below it.
    private func isOpaqueDirectory(_ request: Request, _ name: [UInt8], _ p: UnsafePointer<CChar>, in dirs: DirectoryDescriptors,
                                   _ layer: Int) throws(Errno) -> Bool {
        if dirs.isIndexed(layer), indexWatch != nil {
            // from the map its lookups then use, or its record (see `DirectoryCache.isOpaque`)
            return try request.directories.isOpaque(dirs.path.appending(name), in: layer, layers: request.layers, located: nodes.version)
        }
        let dirfd = dirs[layer]
        guard dirs.foldsNames else { return try isOpaqueDirectory(request, p, in: dirfd) }
        // any of the layer's directories of the name that merge there
        for spelled in dirs.allSpelled(name, in: layer) {
            let opaque = try absentAsNil { () throws(Errno) -> Bool in
                try spelled.name.withCStringCopy { (s: UnsafePointer<CChar>) throws(Errno) -> Bool in
                    try isOpaqueDirectory(request, s, in: spelled.fd)
                }
            }
            if opaque == true { return true }
        }
        return false
    }

    /// Whether the directory `name` in `dirfd` hides the layers below it.
    private func isOpaqueDirectory(_ request: Request, _ name: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) -> Bool {
        try Whiteout.isOpaque(named: name, in: dirfd)
    }

    /// Whether a layer below the substitution shows `name` in directory `parent` (placed at
    /// `dir`): removing or renaming the name must then leave a whiteout.
    func shownBelowSubstitution(_ request: Request, _ name: [UInt8], in parent: NodeID, _ dir: NodeTable.Location) throws(Errno) -> Bool {
        guard dir.placement.reachesBelowSubstitution else { return false }
        let dirs = try descriptors(request, of: parent, located: nodes.version)
        let below = max(1, Int(dirs.placement.top)) ..< Int(dirs.placement.bottom) + 1
        return try absentAsNil { () throws(Errno) -> Resolved in try resolve(request, name, in: dirs, layers: below) } != nil
    }

    private func isDirectory(_ st: stat) -> Bool {
        (st.st_mode & S_IFMT) == S_IFDIR
    }
}

/// Runs `body`, turning "no such entry" (ENOENT, or ENOTDIR for a path through a non-directory)
/// into nil.
func absentAsNil<T>(_ body: () throws(Errno) -> T) throws(Errno) -> T? {
    do {
        return try body()
    } catch let error where error.code == ENOENT || error.code == ENOTDIR {
        return nil
    }
}
