#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Extended attributes: read from the layer serving a node, written to its copy in the
/// substitution; the overlay's own (`trusted.overlay.*`, `user.overlay.*`) are neither shown
/// nor settable.
extension Overlay {
    public func extendedAttribute(_ request: Request, _ node: NodeID, name: [UInt8]) throws(Errno) -> [UInt8] {
        if Whiteout.privateAttributePrefixes.contains(where: { name.starts(with: $0) }) { throw Errno.noData }
        if ControlFile(node: node) != nil { throw Errno.noData }
        return try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> [UInt8] in
            // a file whose every name was removed is read through a descriptor open on it
            if let value = try nodes.withDetachedOpenFile(of: node, { (fd: Int32, _: Placement) throws(Errno) -> [UInt8] in
                try Sys.getxattr(fd: fd, name: p)
            }) {
                return value
            }
            let location = try resolver.locate(request, node)
            if let value = try besideParent(request, location, { (dirfd: Int32, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] in
                try Sys.getxattr(in: dirfd, name, attribute: p)
            }) {
                return value
            }
            return try request.layer(serving: location.placement).extendedAttribute(location.path, name: p)
        }
    }

    /// Runs `body` with the descriptor kept for the node's directory in the layer serving the
    /// node, and the node's name there: reading its extended attributes that way walks no path
    /// and opens nothing (`ls -l` reads two of every file). Nil for the root, where no
    /// descriptor is kept for the directory (its descriptors serve its lookups, see
    /// `DirectoryCache`), and before Linux 6.13, which has no calls for it.
    private func besideParent<T>(_ request: Request, _ location: NodeTable.Location,
                                 _ body: (Int32, UnsafePointer<CChar>) throws(Errno) -> T) throws(Errno) -> T? {
        guard cachesLookups, Sys.hasAttributeCallsAt, !location.path.isRoot,
              let parentPlacement = nodes.placement(of: location.parent),
              let dirs = request.directories.cached(location.parent, parentPlacement) else { return nil }
        // where names fold, as the layer spells the name, in the real directory holding it
        guard let (fd, spelled) = dirs.spelled(location.path.lastName, in: Int(location.placement.top)), fd >= 0 else { return nil }
        return try spelled.withCStringCopy { (name: UnsafePointer<CChar>) throws(Errno) -> T in
            // the descriptors stay open (referenced) while the call uses one of them
            try withExtendedLifetime(dirs) { () throws(Errno) -> T in try body(fd, name) }
        }
    }

    /// The node's attribute names, NUL-separated, without the overlay's private ones.
    public func extendedAttributeNames(_ request: Request, _ node: NodeID) throws(Errno) -> [UInt8] {
        if ControlFile(node: node) != nil { return [] }
        let all: [UInt8]
        if let names = try nodes.withDetachedOpenFile(of: node, { (fd: Int32, _: Placement) throws(Errno) -> [UInt8] in
            try Sys.listxattr(fd: fd)
        }) {
            all = names
        } else {
            let location = try resolver.locate(request, node)
            if let names = try besideParent(request, location, { (dirfd: Int32, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] in
                try Sys.listxattr(in: dirfd, name)
            }) {
                all = names
            } else {
                all = try request.layer(serving: location.placement).extendedAttributeNames(location.path)
            }
        }
        var shown: [UInt8] = []
        for name in all.split(separator: 0) {
            if Whiteout.privateAttributePrefixes.contains(where: { name.starts(with: $0) }) { continue }
            shown.append(contentsOf: name)
            shown.append(0)
        }
        return shown
    }

    /// Sets extended attribute `name` of `node` for the request's caller. Returns whether it
    /// was the access ACL, which also sets the mode's permission bits (the layer's file system
    /// makes them match it), so the kernel's copy of the mode is stale.
    @discardableResult
    public func setExtendedAttribute(_ request: Request, _ node: NodeID, name: [UInt8], value: [UInt8],
                                     flags: Int32) throws(Errno) -> Bool {
        return try request.changing { (change: borrowing Change) throws(Errno) -> Bool in
            try request.checkWritable(warn: warn)
            if Whiteout.privateAttributePrefixes.contains(where: { name.starts(with: $0) }) { throw Errno.notPermitted }
            let isAccessACL = name == Self.accessACL
            try withSubstitutionEntry(request, change, node) { (fd: Int32) throws(Errno) in
                try Sys.withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) in
                    try name.withCStringCopy { (key: UnsafePointer<CChar>) throws(Errno) in
                        _ = try Sys.check { CSyscalls.setxattr(proc, key, value, value.count, flags) }
                    }
                    // the caller's groups are read for the access ACL only, the one attribute they matter to
                    if isAccessACL { try Self.clearSetGroupIDAfterACL(proc, by: request.caller) }
                }
            }
            return isAccessACL
        }
    }

    public static let accessACL = Array("system.posix_acl_access".utf8)

    /// A change of the access ACL by someone neither in the file's group nor root clears the
    /// set-group-ID bit, as Linux file systems do (posix_acl_update_mode). The daemon writes
    /// the ACL as root, which the layer's file system lets keep the bit, so it clears it here.
    private static func clearSetGroupIDAfterACL(_ proc: UnsafePointer<CChar>, by writer: Requester) throws(Errno) {
        var st = stat()
        _ = try Sys.check { stat(proc, &st) }
        guard st.st_mode & S_ISGID != 0, writer.uid != 0, writer.gid != st.st_gid,
              !writer.groups.contains(st.st_gid) else { return }
        _ = try Sys.check { chmod(proc, st.st_mode & 0o7777 & ~S_ISGID) }
    }

    public func removeExtendedAttribute(_ request: Request, _ node: NodeID, name: [UInt8]) throws(Errno) {
        try request.changing { (change: borrowing Change) throws(Errno) in
            try request.checkWritable(warn: warn)
            if Whiteout.privateAttributePrefixes.contains(where: { name.starts(with: $0) }) { throw Errno.noData }
            try withSubstitutionEntry(request, change, node) { (fd: Int32) throws(Errno) in
                try Sys.withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) in
                    try name.withCStringCopy { (key: UnsafePointer<CChar>) throws(Errno) in
                        _ = try Sys.check { CSyscalls.removexattr(proc, key) }
                    }
                }
            }
        }
    }
}
