#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Copy-up: before the first change to an entry of a layer below the substitution (a patch or
/// the main bundle), a copy of it is made in the substitution. The copy is built in the work
/// directory (data, then mode, owner, xattrs and times) and then named in place: a regular
/// file is made without a name and linked there, anything else is made under a temporary name
/// and renamed. Either way it appears complete or not at all.
///
/// The folder `CopyUp/` owns copying up: this type, single entries (this file) and whole
/// directories (materializing, Materialize.swift).
final class CopyUp: Sendable {
    let nodes: NodeTable
    /// Where a node is now, and which layer serves a name (a directory's copy holds what it shows).
    let resolver: Resolver
    /// The merged entries of a directory being materialized.
    let lister: Lister
    /// Told of a substitution removed behind the daemon's back (see `Substitution.checkWritable`).
    let warn: @Sendable (String) -> Void
    /// The directories being materialized now, and how far each copy got.
    let longCopies = Locked<[LongCopy]>([], rank: .longCopies)

    init(nodes: NodeTable, resolver: Resolver, lister: Lister, warn: @escaping @Sendable (String) -> Void) {
        self.nodes = nodes
        self.resolver = resolver
        self.lister = lister
        self.warn = warn
    }

    /// The directories being materialized now, for `.stats`.
    var inProgress: [LongCopy] { longCopies.withLock { $0 } }
    /// Makes directory `node` exist in the substitution, copying up its ancestors first, and
    /// returns its path. A directory copied up stays merged with the layers' below.
    func substitutionDirectory(_ request: Request, _ change: borrowing Change, _ node: NodeID) throws(Errno) -> LayerPath {
        let location = try resolver.locate(request, node)
        guard location.placement.isDirectory else { throw Errno.notDirectory }
        if location.placement.inSubstitution { return location.path }
        _ = try substitutionDirectory(request, change, location.parent)
        let source = request.layer(serving: location.placement)
        let st = try source.attributes(location.path)
        try source.withEntry(location.path) { (fd: Int32) throws(Errno) in
            // with its extended attributes, a default ACL among them (kernel overlayfs copies them too)
            // named as the layer it comes from spells it, where names fold
            _ = try placeCopy(request, change, at: source.spelled(location.path)) { (work: Int32, temporary: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { mkdirat(work, temporary, 0o700) }
                try Sys.applyMetadata(st, to: temporary, in: work, from: fd)
            }
        }
        request.recordOrigin(request.shown(st).st_ino, forCopyAt: location.path)
        nodes.update(node) { $0.top = 0 }
        nodes.forgetOtherSpellings(request)
        return location.path
    }

    /// Copies non-directory `node` up if a layer below the substitution serves it; returns its
    /// path. `withData: false` copies an empty file (for an open with O_TRUNC).
    @discardableResult
    func copyUp(_ request: Request, _ change: borrowing Change, _ node: NodeID, withData: Bool = true) throws(Errno) -> LayerPath {
        let location = try resolver.locate(request, node)
        if location.placement.isDirectory { return try substitutionDirectory(request, change, node) }
        if location.placement.inSubstitution { return location.path }
        _ = try substitutionDirectory(request, change, location.parent)
        let source = request.layer(serving: location.placement)
        let st = try source.attributes(location.path)
        var copy: ino_t = 0
        let placed: Bool
        // named as the layer it comes from spells it, where names fold
        let placedAt = source.spelled(location.path)
        if let unnamed = try unnamedCopy(request, st, at: location.path, from: source, withData: withData) {
            // linked straight into place: no temporary name to rename
            defer { Sys.close(unnamed) }
            placed = try placeEntry(request, change, at: placedAt) { (dirfd: Int32, name: UnsafePointer<CChar>) throws(Errno) -> Bool in
                do throws(Errno) {
                    try Sys.link(unnamed, as: name, in: dirfd)
                    return true
                } catch where error.code == EEXIST {
                    return false
                }
            }
            copy = try Sys.fstat(unnamed).st_ino
        } else {
            placed = try placeCopy(request, change, at: placedAt) { (work: Int32, temporary: UnsafePointer<CChar>) throws(Errno) in
                copy = try copyEntry(request, st, at: location.path, from: source, to: temporary, in: work, withData: withData)
            }
        }
        // one name of a file with several is copied alone, as on kernel overlayfs: the copy
        // shows a number of its own, not the one the other names keep showing
        if st.st_nlink == 1 {
            if placed {
                request.recordOrigin(request.shown(st).st_ino, forCopyInode: copy)
            } else {
                request.recordOrigin(request.shown(st).st_ino, forCopyAt: location.path)  // a concurrent copy-up's
            }
        }
        nodes.update(node) { $0 = .file(in: 0) }
        nodes.forgetOtherSpellings(request)
        return location.path
    }

    /// Copies the non-directory at `path` of `layer` (attributes `st`) to `name` in `dirfd`:
    /// its data (unless `withData` is false), then mode, owner, xattrs and times. Returns the
    /// copy's inode number.
    func copyEntry(_ request: Request, _ st: stat, at path: LayerPath, from layer: Layer, to name: UnsafePointer<CChar>, in dirfd: Int32,
                   withData: Bool = true) throws(Errno) -> ino_t {
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            let source = try layer.open(path, flags: O_RDONLY)
            defer { Sys.close(source) }
            // made unnamed (where the file system can) and named once complete: syncing a file
            // not yet named does not sync its directory too (ext4 without a journal does that
            // for a new name), and a crash leaves nothing half made behind
            let unnamed = openat(dirfd, ".", O_WRONLY | pb_O_TMPFILE | pb_O_CLOEXEC, 0o600)
            let copy = unnamed >= 0
                ? unnamed
                : try Sys.check { openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | pb_O_CLOEXEC, 0o600) }
            defer { Sys.close(copy) }
            try fill(request, copy, as: st, from: source, withData: withData)
            if unnamed >= 0 { try Sys.link(copy, as: name, in: dirfd) }
            return try Sys.fstat(copy).st_ino
        case S_IFLNK:
            let target = try layer.readLink(path)
            try target.withCStringCopy { (t: UnsafePointer<CChar>) throws(Errno) in
                _ = try Sys.check { symlinkat(t, dirfd, name) }
            }
            try Sys.applyMetadata(st, to: name, in: dirfd, from: nil)
            try copyExtendedAttributes(at: path, of: layer, to: name, in: dirfd)
        default:
            _ = try Sys.check { mknodat(dirfd, name, st.st_mode, st.st_rdev) }
            try Sys.applyMetadata(st, to: name, in: dirfd, from: nil)
            try copyExtendedAttributes(at: path, of: layer, to: name, in: dirfd)
        }
        return try Sys.lstatat(dirfd, name).st_ino
    }

    /// A copy of the regular file at `path` of `layer` (attributes `st`), made without a name
    /// in the work directory and open for writing, to be linked into place; nil where the
    /// substitution's file system makes no unnamed file (O_TMPFILE), and the copy is then
    /// made under a temporary name as for other entries.
    private func unnamedCopy(_ request: Request, _ st: stat, at path: LayerPath, from layer: Layer, withData: Bool) throws(Errno) -> Int32? {
        guard st.st_mode & S_IFMT == S_IFREG else { return nil }
        let work = try request.workspace(warn: warn)
        let copy = openat(work.fd, ".", O_WRONLY | pb_O_TMPFILE | pb_O_CLOEXEC, 0o600)
        guard copy >= 0 else { return nil }
        do throws(Errno) {
            let source = try layer.open(path, flags: O_RDONLY)
            defer { Sys.close(source) }
            try fill(request, copy, as: st, from: source, withData: withData)
            return copy
        } catch {
            Sys.close(copy)
            throw error
        }
    }

    /// Gives the new file `copy` the data (unless `withData` is false), mode, owner, xattrs
    /// and times of `source` (attributes `st`), and puts it on the disk before it takes the
    /// other file's place: a crash must not leave an empty or partial copy hiding it (kernel
    /// overlayfs syncs here too).
    private func fill(_ request: Request, _ copy: Int32, as st: stat, from source: Int32, withData: Bool) throws(Errno) {
        if withData { try Sys.copyData(from: source, to: copy, size: st.st_size, for: request) }
        try Sys.applyMetadata(st, toOpenFile: copy, from: source)
        if withData && st.st_size > 0 { _ = try Sys.check { fsync(copy) } }
    }

    /// Copies the extended attributes of the entry at `path` of `layer`, which is not opened
    /// for it (see `Sys.copyExtendedAttributes`), to `name` in `dirfd`.
    private func copyExtendedAttributes(at path: LayerPath, of layer: Layer, to name: UnsafePointer<CChar>,
                                        in dirfd: Int32) throws(Errno) {
        try layer.withDirectory(path.parent) { (source: Int32) throws(Errno) in
            path.lastName.withCStringCopy { (entry: UnsafePointer<CChar>) in
                Sys.copyExtendedAttributes(of: entry, in: source, to: name, in: dirfd)
            }
        }
    }

    /// Builds an entry under a temporary name in the work directory with `build`, then renames
    /// it to `path` in the substitution unless something is already there (a concurrent
    /// copy-up). Returns whether the entry built is the one in place.
    @discardableResult
    private func placeCopy(_ request: Request, _ change: borrowing Change, at path: LayerPath,
                           _ build: (Int32, UnsafePointer<CChar>) throws(Errno) -> Void) throws(Errno) -> Bool {
        let work = try request.workspace(warn: warn)
        let temporary = work.temporaryName()
        return try temporary.withCStringCopy { (tmp: UnsafePointer<CChar>) throws(Errno) -> Bool in
            do throws(Errno) {
                try build(work.fd, tmp)
                let placed = try placeEntry(request, change, at: path) { (dirfd: Int32, name: UnsafePointer<CChar>) throws(Errno) -> Bool in
                    if pb_renameat2(work.fd, tmp, dirfd, name, pb_RENAME_NOREPLACE) == 0 { return true }
                    guard errno == EEXIST else { throw Errno.current }
                    return false
                }
                if !placed { try? Workspace.removeTree(temporary, in: work.fd) }
                return placed
            } catch {
                try? Workspace.removeTree(temporary, in: work.fd)
                throw error
            }
        }
    }

    /// Names a copy `path` in the substitution with `name` (given the directory and the last
    /// name; false when something is already there), keeping the directory's times: a
    /// copy-up shows no change in its directory. Returns what `name` returned.
    private func placeEntry(_ request: Request, _ change: borrowing Change, at path: LayerPath,
                            _ name: (Int32, UnsafePointer<CChar>) throws(Errno) -> Bool) throws(Errno) -> Bool {
        try request.substitution.withDirectory(path.parent) { (dirfd: Int32) throws(Errno) -> Bool in
            let times = try Sys.fstat(dirfd)
            let placed = try path.lastName.withCStringCopy { (last: UnsafePointer<CChar>) throws(Errno) -> Bool in
                try name(dirfd, last)
            }
            Sys.restoreTimes(times, of: dirfd)
            return placed
        }
    }
}

extension Sys {
    /// Names the open file `fd`, one made without a name (O_TMPFILE), `name` in `dirfd`;
    /// EEXIST when that name is taken.
    static func link(_ fd: Int32, as name: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) {
        try withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) in
            _ = try check { linkat(AT_FDCWD, proc, dirfd, name, AT_SYMLINK_FOLLOW) }
        }
    }

    /// Puts back the access and modification times `st` of the directory `dirfd` (an O_PATH
    /// descriptor is fine).
    static func restoreTimes(_ st: stat, of dirfd: Int32) {
        var times = [st.st_atim, st.st_mtim]
        _ = utimensat(dirfd, ".", &times, 0)
    }

    /// Copies `size` bytes, keeping holes: only the data segments are copied (with
    /// copy_file_range, which may share blocks; else read and write), then the size is set if
    /// the data did not reach it. Stops with EINTR once `request`'s caller gave up.
    static func copyData(from source: Int32, to destination: Int32, size: off_t,
                         for request: Request? = nil) throws(Errno) {
        var offset: off_t = 0
        var copied: off_t = 0  // where the copy's data ends
        while offset < size {
            let dataStart = lseek(source, offset, pb_SEEK_DATA)
            if dataStart < 0 {
                if errno == ENXIO { break }  // only a hole remains
                copied = try copyRange(source, destination, from: offset, to: size, request)
                break
            }
            var dataEnd = lseek(source, dataStart, pb_SEEK_HOLE)
            if dataEnd < 0 { dataEnd = size }
            copied = try copyRange(source, destination, from: dataStart, to: min(dataEnd, size), request)
            offset = dataEnd
        }
        // a trailing hole, or a source that ended early
        if copied != size { _ = try check { ftruncate(destination, size) } }
    }

    /// Copies bytes `start..<end`, 64 MiB at a time, asking `request` between whether its caller
    /// gave up; returns where the copy stopped (`end`, or earlier at the source's end).
    private static func copyRange(_ source: Int32, _ destination: Int32, from start: off_t, to end: off_t,
                                  _ request: Request?) throws(Errno) -> off_t {
        var input = Int64(start)
        var output = Int64(start)
        while input < Int64(end) {
            try request?.checkInterrupted()
            let count = pb_copy_file_range(source, &input, destination, &output, Int(min(Int64(end) - input, 64 << 20)))
            if count > 0 { continue }
            if count == 0 { break }
            if errno == EINTR { continue }
            if [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(errno) {
                return try readWriteRange(source, destination, from: off_t(input), to: end)
            }
            throw Errno.current
        }
        return off_t(output)
    }

    private static func readWriteRange(_ source: Int32, _ destination: Int32, from start: off_t, to end: off_t) throws(Errno) -> off_t {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = start
        while offset < end {
            let want = Int(min(off_t(buffer.count), end - offset))
            let count = try checkSize { pread(source, &buffer, want, offset) }
            if count == 0 { return offset }
            var written = 0
            while written < count {
                let done = written
                written += try checkSize {
                    buffer.withUnsafeBytes { pwrite(destination, $0.baseAddress?.advanced(by: done), count - done, offset + off_t(done)) }
                }
            }
            offset += off_t(count)
        }
        return offset
    }

    /// Gives the entry `name` in `dirfd` the owner, mode, extended attributes and times of
    /// `st` (xattrs from `source` when given). Ownership is kept only where permitted.
    static func applyMetadata(_ st: stat, to name: UnsafePointer<CChar>, in dirfd: Int32, from source: Int32?) throws(Errno) {
        _ = fchownat(dirfd, name, st.st_uid, st.st_gid, pb_AT_SYMLINK_NOFOLLOW)
        if st.st_mode & S_IFMT != S_IFLNK {
            _ = try check { fchmodat(dirfd, name, st.st_mode & 0o7777, 0) }
        }
        if let source { try copyExtendedAttributes(from: source, to: name, in: dirfd) }
        var times = [st.st_atim, st.st_mtim]
        _ = try check { utimensat(dirfd, name, &times, pb_AT_SYMLINK_NOFOLLOW) }
    }

    /// The same for a regular file open as `fd`, through its descriptor (xattrs from `source`).
    static func applyMetadata(_ st: stat, toOpenFile fd: Int32, from source: Int32) throws(Errno) {
        _ = fchown(fd, st.st_uid, st.st_gid)
        _ = try check { fchmod(fd, st.st_mode & 0o7777) }
        try copyExtendedAttributes(from: source, toOpenFile: fd)
        var times = [st.st_atim, st.st_mtim]
        _ = try check { futimens(fd, &times) }
    }

    private static func copyExtendedAttributes(from source: Int32, to name: UnsafePointer<CChar>, in dirfd: Int32) throws(Errno) {
        let target = try check { openat(dirfd, name, O_RDONLY | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
        defer { close(target) }
        try copyExtendedAttributes(from: source, toOpenFile: target)
    }

    private static func copyExtendedAttributes(from source: Int32, toOpenFile target: Int32) throws(Errno) {
        copyAttributes(named: (try? listxattr(fd: source)) ?? [], read: { try? getxattr(fd: source, name: $0) },
                       write: { key, value in _ = CSyscalls.fsetxattr(target, key, value, value.count, 0) })
    }
}

extension LayerPath {
    /// The directory holding this path's last name (the root for a single name).
    public var parent: LayerPath {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return .root }
        return LayerPath(bytes: Array(bytes[..<slash]))
    }

    public var lastName: [UInt8] {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return bytes }
        return Array(bytes[(slash + 1)...])
    }
}
