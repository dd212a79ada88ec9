#if canImport(Glibc)
import Glibc
#endif

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
        let childPath = dir.appending(name)
        var upperEntry: stat? = nil
        var lowerWhitedOut = false
        if dirPlacement.inUpper {
            switch try findInUpper(name, in: dir, dirPlacement) {
            case .hidden: throw Errno.noEntry
            case .entry(let st, let whitedOut):
                upperEntry = st
                lowerWhitedOut = whitedOut
            case .absent: break
            }
        }
        if let st = upperEntry, !isDirectory(st) {
            return Resolved(placement: Placement(inUpper: true, inLower: false, isDirectory: false),
                            attributes: reported(st, inUpper: true))
        }
        var lowerEntry: stat? = nil
        if dirPlacement.inLower {
            lowerEntry = try absentAsNil { () throws(Errno) -> stat in try lower.attributes(childPath) }
            if let st = lowerEntry, Whiteout.isDevice(st) { lowerEntry = nil }
        }
        if let st = upperEntry {
            var merges = false
            if let below = lowerEntry, isDirectory(below), !lowerWhitedOut {
                merges = try !upper.withDirectory(childPath) { (fd: Int32) throws(Errno) -> Bool in try Whiteout.isOpaque(fd) }
            }
            return Resolved(placement: Placement(inUpper: true, inLower: merges, isDirectory: true),
                            attributes: reported(st, inUpper: true))
        }
        guard let st = lowerEntry else { throw Errno.noEntry }
        return Resolved(placement: Placement(inUpper: false, inLower: true, isDirectory: isDirectory(st)),
                        attributes: reported(st, inUpper: false))
    }

    private enum UpperFind {
        /// An entry; for a directory, whether a whiteout beside it hides the main bundle's
        /// entry of the same name (OCI: a whiteout applies to the layers below, so a directory
        /// recreated in the same layer is not merged).
        case entry(stat, lowerWhitedOut: Bool)
        case hidden
        case absent
    }

    private func findInUpper(_ name: [UInt8], in dir: LayerPath, _ dirPlacement: Placement) throws(Errno) -> UpperFind {
        let found = try absentAsNil { () throws(Errno) -> UpperFind in
            try upper.withDirectory(dir) { (dirfd: Int32) throws(Errno) -> UpperFind in
                let st = try absentAsNil { () throws(Errno) -> stat in
                    try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(dirfd, p) }
                }
                if let st {
                    if Whiteout.isDevice(st) { return .hidden }
                    let whitedOut = isDirectory(st) && dirPlacement.inLower ? try Whiteout.fileExists(hiding: name, in: dirfd) : false
                    return .entry(st, lowerWhitedOut: whitedOut)
                }
                return try Whiteout.fileExists(hiding: name, in: dirfd) ? .hidden : .absent
            }
        }
        // the substitution's directory itself may have gone: then it holds nothing
        return found ?? .absent
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
