#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Changing attributes: the entry is copied up first, then changed in the substitution.
extension Overlay {
    /// The attribute changes of one setattr request; nil fields stay as they are.
    public struct AttributeChanges: Sendable {
        public var mode: mode_t?
        public var uid: uid_t?
        public var gid: gid_t?
        public var size: off_t?
        /// Each a time, or `pb_UTIME_NOW` / `pb_UTIME_OMIT` in `tv_nsec`.
        public var accessTime: timespec?
        public var modificationTime: timespec?

        public init() {}

        /// A chown to the owner a file has (`chown(path, -1, -1)`) asks for no change, and
        /// changes the change time on Linux file systems, which a chown of the layer's file
        /// to its owner does too.
        var touchesChangeTimeOnly: Bool {
            mode == nil && uid == nil && gid == nil && size == nil && accessTime == nil && modificationTime == nil
        }
    }

    /// Applies `changes` to `node` (through `fd` when the file is open) and returns the new
    /// attributes. A file whose every name was removed while open is changed through an open
    /// descriptor, as on any file system; a removed main-bundle file cannot be (ESTALE).
    public func setAttributes(_ request: Request, _ node: NodeID, _ changes: AttributeChanges, openFile fd: Int32?) throws(Errno) -> stat {
        try request.changing { (change: borrowing Change) throws(Errno) -> stat in
            try setAttributesHeld(request, change, node, changes, openFile: fd)
        }
    }

    /// `setAttributes`, within the request's `change`.
    private func setAttributesHeld(_ request: Request, _ change: borrowing Change, _ node: NodeID, _ changes: AttributeChanges,
                                   openFile fd: Int32?) throws(Errno) -> stat {
        try request.checkWritable(warn: warn)
        if let st = try withRemovedFile(node, { (open: Int32) throws(Errno) -> stat in
            try Overlay.apply(changes, toOpenFile: fd ?? open)
            return try Sys.fstat(fd ?? open)
        }) {
            return request.shown(st)
        }
        let path = try copyUp.copyUp(request, change, node, withData: changes.size != 0)
        let substitution = try request.substitution
        try substitution.withDirectory(path.parent) { (dirfd: Int32) throws(Errno) in
            try (path.isRoot ? Array(".".utf8) : path.lastName).withCStringCopy { (name: UnsafePointer<CChar>) throws(Errno) in
                let at = path.isRoot ? substitution.rootFD : dirfd
                if let size = changes.size {
                    if let fd {
                        _ = try Sys.check { ftruncate(fd, size) }
                    } else {
                        let file = try Sys.openat2(at, name, flags: O_WRONLY | pb_O_NOFOLLOW | pb_O_CLOEXEC, resolve: Layer.resolve)
                        defer { Sys.close(file) }
                        _ = try Sys.check { ftruncate(file, size) }
                    }
                }
                if changes.uid != nil || changes.gid != nil || changes.touchesChangeTimeOnly {
                    _ = try Sys.check {
                        fchownat(at, name, changes.uid ?? uid_t.max, changes.gid ?? gid_t.max, pb_AT_SYMLINK_NOFOLLOW)
                    }
                }
                if let mode = changes.mode {
                    // never follows a symlink (glibc answers EOPNOTSUPP for one)
                    _ = try Sys.check { fchmodat(at, name, mode & 0o7777, pb_AT_SYMLINK_NOFOLLOW) }
                }
                if changes.accessTime != nil || changes.modificationTime != nil {
                    let omit = timespec(tv_sec: 0, tv_nsec: pb_UTIME_OMIT)
                    var times = [changes.accessTime ?? omit, changes.modificationTime ?? omit]
                    _ = try Sys.check { utimensat(at, name, &times, pb_AT_SYMLINK_NOFOLLOW) }
                }
            }
        }
        if let fd { return try attributes(request, of: node, openFile: fd) }
        return try attributes(request, of: node)
    }

    /// `changes` made through open file `fd`, in the order `setAttributes` makes them by path.
    /// An O_PATH descriptor (of a removed directory the kernel holds) is opened again through
    /// its /proc path, which leads to its inode whatever became of its names.
    private static func apply(_ changes: AttributeChanges, toOpenFile fd: Int32) throws(Errno) {
        if fcntl(fd, F_GETFL) & pb_O_PATH != 0 {
            // a directory or regular file only: opening a device or FIFO would act on it
            let kind = try Sys.fstat(fd).st_mode & S_IFMT
            guard kind == S_IFDIR || kind == S_IFREG else { throw Errno.stale }
            let access = changes.size != nil ? O_WRONLY : O_RDONLY
            let opened = try Sys.withProcPath(fd) { (proc: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Sys.check { open(proc, access | O_NONBLOCK | O_NOCTTY | pb_O_CLOEXEC) }
            }
            defer { Sys.close(opened) }
            return try apply(changes, toOpenFile: opened)
        }
        if let size = changes.size { _ = try Sys.check { ftruncate(fd, size) } }
        if changes.uid != nil || changes.gid != nil || changes.touchesChangeTimeOnly {
            _ = try Sys.check { fchown(fd, changes.uid ?? uid_t.max, changes.gid ?? gid_t.max) }
        }
        if let mode = changes.mode { _ = try Sys.check { fchmod(fd, mode & 0o7777) } }
        if changes.accessTime != nil || changes.modificationTime != nil {
            let omit = timespec(tv_sec: 0, tv_nsec: pb_UTIME_OMIT)
            var times = [changes.accessTime ?? omit, changes.modificationTime ?? omit]
            _ = try Sys.check { futimens(fd, &times) }
        }
    }

    /// Runs `body` with a descriptor open on `node` when every name of it was removed (nil when
    /// it has a name). Only a substitution file may be changed so: a file of a patch or of the
    /// main bundle stays as it is (ESTALE; kernel overlayfs fails such a change too).
    private func withRemovedFile<T>(_ node: NodeID, _ body: (Int32) throws(Errno) -> T) throws(Errno) -> T? {
        try nodes.withDetachedOpenFile(of: node) { (fd: Int32, placement: Placement) throws(Errno) -> T in
            guard placement.inSubstitution else { throw Errno.stale }
            return try body(fd)
        }
    }

    /// Runs `body` with a descriptor of the substitution's entry of `node` (copied up first): an
    /// O_PATH one of its path, or one open on it when every name of it was removed.
    func withSubstitutionEntry<T>(_ request: Request, _ change: borrowing Change, _ node: NodeID, _ body: (Int32) throws(Errno) -> T) throws(Errno) -> T {
        if let result = try withRemovedFile(node, body) { return result }
        let path = try copyUp.copyUp(request, change, node)
        return try request.substitution.withEntry(path, body)
    }

    /// Clears the set-user-ID bit of regular file `node`, and its set-group-ID bit where the
    /// kernel would for a write by the request's caller (the file is group-executable, or the
    /// caller is neither root nor in the file's group). The kernel leaves this to the daemon under
    /// FUSE_HANDLE_KILLPRIV_V2 when a file is written, truncated or given away. Returns the new
    /// attributes, or nil when there was nothing to clear.
    public func clearSetIDBits(_ request: Request, _ node: NodeID, openFile fd: Int32?) throws(Errno) -> stat? {
        return try request.changing { (change: borrowing Change) throws(Errno) -> stat? in
            let st: stat
            if let fd { st = try attributes(request, of: node, openFile: fd) } else { st = try attributes(request, of: node) }
            guard st.st_mode & S_IFMT == S_IFREG, let mode = Self.withoutSetIDBits(st, writer: { request.caller }) else { return nil }
            var changes = AttributeChanges()
            changes.mode = mode
            return try setAttributesHeld(request, change, node, changes, openFile: fd)
        }
    }

    /// The permission bits of `st` without the set-ID bits a write by `writer` clears; nil when
    /// it clears none.
    static func withoutSetIDBits(_ st: stat, writer: () -> Requester) -> mode_t? {
        let old = st.st_mode & 0o7777
        var mode = old & ~S_ISUID
        if old & S_ISGID != 0 {
            if old & S_IXGRP != 0 {
                mode &= ~S_ISGID
            } else {
                let w = writer()
                if w.uid != 0 && w.gid != st.st_gid && !w.groups.contains(st.st_gid) { mode &= ~S_ISGID }
            }
        }
        return mode == old ? nil : mode
    }

    /// fsyncdir: flushes the substitution's directory (the other layers are never written).
    public func syncDirectory(_ request: Request, _ node: NodeID, dataOnly: Bool) throws(Errno) {
        let location = try resolver.locate(request, node)
        guard location.placement.isDirectory else { throw Errno.notDirectory }
        guard location.placement.inSubstitution else { return }
        let fd = try request.substitution.open(location.path, flags: O_RDONLY | pb_O_DIRECTORY)
        defer { Sys.close(fd) }
        _ = try Sys.check { dataOnly ? fdatasync(fd) : fsync(fd) }
    }
}
