#if canImport(Glibc)
import Glibc
#endif
import CFuseShim

extension Overlay {
    /// What a name of a directory resolves to: its placement and reported attributes.
    struct Resolved {
        var placement: Placement
        var attributes: stat
    }

    /// Resolves `name` in the directory at `dir`: the substitution's entry wins unless it is a
    /// whiteout; the main bundle's entry shows through where the directory is not opaque; a
    /// directory present in both is merged unless the substitution's copy is opaque.
    func resolve(_ name: [UInt8], in dir: LayerPath, _ dirPlacement: Placement) throws(Errno) -> Resolved {
        try resolve(name, in: DirectoryDescriptors(dir, dirPlacement, upper: upper, lower: lower))
    }

    /// Resolves `name` in directory node `parent` through the descriptors kept for it (see
    /// `DirectoryCache`): for checks before a change, which itself goes by path.
    func resolve(_ name: [UInt8], inNode parent: NodeID) throws(Errno) -> Resolved {
        try resolve(name, in: descriptors(of: parent, located: nodes.version))
    }

    /// The descriptors of directory node `parent`: those kept for it (which need no path, as
    /// every invalidation drops them), or opened at its location. `located` is the table's
    /// version before.
    func descriptors(of parent: NodeID, located: UInt64) throws(Errno) -> DirectoryDescriptors {
        if let placement = nodes.placement(of: parent), let kept = directories.cached(parent, placement) { return kept }
        let dir = try locate(parent)
        guard dir.placement.isDirectory else { throw Errno.notDirectory }
        return try directories.descriptors(parent, dir, located: located, upper: upper, lower: lower)
    }

    /// Resolves a listed `item` in the directory `dirs` it was listed from, while nothing
    /// changed since: an entry of the main bundle (which the substitution neither has nor
    /// whites out) or a non-directory of the substitution is one `fstatat` away; a directory of
    /// the substitution may merge the main bundle's and is resolved in full.
    func resolve(listed item: DirectoryListing.Item, of listing: DirectoryListing) throws(Errno) -> Resolved {
        let dirs = listing.directories
        let fd = item.fromUpper ? dirs.upper : dirs.lower
        guard fd >= 0, !(item.fromUpper && item.type == UInt8(DT_DIR)) else {
            return try resolve(listing.name(item), in: dirs)
        }
        let st = try listing.list.withNames { (names) throws(Errno) -> stat in try Sys.lstatat(fd, names.cString(item)) }
        if Whiteout.isDevice(st) || (item.fromUpper && isDirectory(st)) { return try resolve(listing.name(item), in: dirs) }
        return Resolved(placement: Placement(inUpper: item.fromUpper, inLower: !item.fromUpper, isDirectory: isDirectory(st)),
                        attributes: reported(st, inUpper: item.fromUpper))
    }

    /// Resolves `name` in the directory open as `dirs`: one `fstatat` per layer that has the
    /// directory, and a look for a whiteout only where the main bundle has the name.
    func resolve(_ name: [UInt8], in dirs: DirectoryDescriptors) throws(Errno) -> Resolved {
        if let known = dirs.known, !known.mayHave(name) { throw Errno.noEntry }
        return try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Resolved in
            var upperEntry: stat? = nil
            if dirs.upper >= 0 {
                upperEntry = try absentAsNil { () throws(Errno) -> stat in try Sys.lstatat(dirs.upper, p) }
                if let st = upperEntry {
                    if Whiteout.isDevice(st) { throw Errno.noEntry }
                    if !isDirectory(st) {
                        return Resolved(placement: Placement(inUpper: true, inLower: false, isDirectory: false),
                                        attributes: reported(st, inUpper: true))
                    }
                }
            }
            var lowerEntry: stat? = nil
            if dirs.lower >= 0 {
                lowerEntry = try absentAsNil { () throws(Errno) -> stat in try Sys.lstatat(dirs.lower, p) }
                if let st = lowerEntry, Whiteout.isDevice(st) { lowerEntry = nil }
            }
            // a whiteout file hides the main bundle's entry; beside a substitution directory
            // of the same name it means that directory was made anew, so it is not merged
            if lowerEntry != nil, dirs.upper >= 0, try Whiteout.fileExists(hiding: name, in: dirs.upper) {
                if upperEntry == nil { throw Errno.noEntry }
                lowerEntry = nil
            }
            if let st = upperEntry {
                var merges = false
                if let below = lowerEntry, isDirectory(below) {
                    let child = try Sys.check { openat(dirs.upper, p, pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
                    defer { Sys.close(child) }
                    merges = try !Whiteout.isOpaque(child, named: p, in: dirs.upper)
                }
                return Resolved(placement: Placement(inUpper: true, inLower: merges, isDirectory: true),
                                attributes: reported(st, inUpper: true))
            }
            guard let st = lowerEntry else {
                if upperEntry == nil { dirs.known?.missed(upper: dirs.upper, lower: dirs.lower) }
                throw Errno.noEntry
            }
            return Resolved(placement: Placement(inUpper: false, inLower: true, isDirectory: isDirectory(st)),
                            attributes: reported(st, inUpper: false))
        }
    }

    private func reported(_ st: stat, inUpper: Bool) -> stat {
        var result = st
        result.st_ino = shownInode(st.st_ino, inUpper: inUpper)
        return result
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
