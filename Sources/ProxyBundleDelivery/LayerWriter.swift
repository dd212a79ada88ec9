import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// Writes a layer's entries under one directory, touching nothing outside it: every file is
/// made relative to a descriptor of its parent, parents are opened one name at a time with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, and names are checked before any of that
/// (no absolute names, no `..`, no over-long names). Directories get their mode, owner and
/// times after their entries are written (`finish`).
final class LayerWriter {
    private let root: Int32
    private let limits: ExtractLimits
    private let asRoot = geteuid() == 0
    private var directories: [[UInt8]: TarEntry] = [:]
    private var directoryOrder: [[UInt8]] = []
    private var cachedParent: (path: ArraySlice<[UInt8]>, fd: Int32)?
    private(set) var dropped = 0

    init(root: Int32, limits: ExtractLimits) {
        self.root = root
        self.limits = limits
    }

    deinit { if let cachedParent { close(cachedParent.fd) } }

    private var special: Bool { limits.allowSpecial && asRoot }

    /// The names of `path` below the layer's root; refuses what could reach outside it.
    static func components(_ path: [UInt8], entry: [UInt8], what: String = "name") throws -> [[UInt8]] {
        if path.first == UInt8(ascii: "/") { throw LayerRefusal(entry: entry, rule: "an absolute \(what) is refused") }
        if path.contains(0) { throw LayerRefusal(entry: entry, rule: "its \(what) holds a NUL byte") }
        if path.count > ExtractLimits.maxPath {
            throw LayerRefusal(entry: entry, rule: "its \(what) is longer than \(ExtractLimits.maxPath) bytes")
        }
        var parts: [[UInt8]] = []
        for part in path.split(separator: UInt8(ascii: "/")) where !part.elementsEqual([0x2e]) {
            if part.elementsEqual([0x2e, 0x2e]) { throw LayerRefusal(entry: entry, rule: "a \(what) holding '..' is refused") }
            if part.count > ExtractLimits.maxName {
                throw LayerRefusal(entry: entry, rule: "a component of its \(what) is longer than \(ExtractLimits.maxName) bytes")
            }
            parts.append(Array(part))
        }
        return parts
    }

    func write(_ entry: TarEntry, reader: TarReader) throws {
        let parts = try LayerWriter.components(entry.name, entry: entry.name)
        guard let leaf = parts.last else {
            guard entry.kind == .directory else { throw LayerRefusal(entry: entry.name, rule: "only a directory may name the layer's root") }
            record(directory: [], entry)
            return
        }
        let parent = try openParent(parts.dropLast(), entry: entry.name, create: true)
        try clear(parent, leaf, for: entry)
        try leaf.withCStringCopy { name in try make(entry, parent: parent, name: name, reader: reader, path: parts) }
    }

    private func make(_ entry: TarEntry, parent: Int32, name: UnsafePointer<CChar>, reader: TarReader, path: [[UInt8]]) throws {
        switch entry.kind {
        case .file:
            let fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | pb_O_NOFOLLOW | pb_O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw failure(entry, "cannot create it", errno) }
            defer { close(fd) }
            try reader.content(entry) { piece in
                var at = 0
                while at < piece.count {
                    let n = Glibc.write(fd, piece.baseAddress! + at, piece.count - at)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { throw failure(entry, "cannot write it", errno) }
                    at += n
                }
            }
            try setAttributes(fd, entry)
        case .directory:
            guard mkdirat(parent, name, 0o700) == 0 || errno == EEXIST else { throw failure(entry, "cannot create it", errno) }
            record(directory: path.joined(separator: [UInt8(ascii: "/")]).map { $0 }, entry)
        case .symlink:
            let made = entry.link.withCStringCopy { symlinkat($0, parent, name) }
            guard made == 0 else { throw failure(entry, "cannot create it", errno) }
            if asRoot { fchownat(parent, name, entry.uid, entry.gid, pb_AT_SYMLINK_NOFOLLOW) }
            var times = LayerWriter.times(entry)
            utimensat(parent, name, &times, pb_AT_SYMLINK_NOFOLLOW)
        case .hardLink:
            let target = try LayerWriter.components(entry.link, entry: entry.name, what: "link target")
            guard let targetLeaf = target.last else { throw LayerRefusal(entry: entry.name, rule: "a hard link to the layer's root is refused") }
            let targetParent = try openParent(target.dropLast(), entry: entry.name, create: false, linking: true)
            defer { close(targetParent) }
            let linked = targetLeaf.withCStringCopy { linkat(targetParent, $0, parent, name, 0) }
            if linked != 0 {
                if errno == ENOENT { throw LayerRefusal(entry: entry.name, rule: "a hard link to a name not in the layer is refused") }
                if errno == EPERM { throw LayerRefusal(entry: entry.name, rule: "a hard link to a directory is refused") }
                throw failure(entry, "cannot link it", errno)
            }
        case .characterDevice, .blockDevice, .fifo:
            guard special else { dropped += 1; return }
            let type = entry.kind == .fifo ? S_IFIFO : entry.kind == .blockDevice ? S_IFBLK : S_IFCHR
            let device = LayerWriter.device(entry.device.major, entry.device.minor)
            guard mknodat(parent, name, type | 0o600, device) == 0 else { throw failure(entry, "cannot create it", errno) }
            if asRoot { fchownat(parent, name, entry.uid, entry.gid, pb_AT_SYMLINK_NOFOLLOW) }
            fchmodat(parent, name, mode_t(mode(entry)), 0)
            var times = LayerWriter.times(entry)
            utimensat(parent, name, &times, pb_AT_SYMLINK_NOFOLLOW)
        }
    }

    /// Gives the directories their attributes, deepest first, then syncs the layer's file system.
    func finish() throws {
        for path in directoryOrder.sorted(by: { $0.count > $1.count }) {
            guard let entry = directories[path] else { continue }
            let fd = (path.isEmpty ? [0x2e] : path).withCStringCopy {
                pb_openat2(root, $0, UInt64(O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC), 0,
                           pb_RESOLVE_BENEATH | pb_RESOLVE_NO_SYMLINKS)
            }
            guard fd >= 0 else { continue }  // replaced by a later entry that is not a directory
            defer { close(fd) }
            try setAttributes(fd, entry)
        }
        guard pb_syncfs(root) == 0 else { throw DeliveryError("cannot sync the layer", errno: errno) }
    }

    private func record(directory path: [UInt8], _ entry: TarEntry) {
        if directories.updateValue(entry, forKey: path) == nil { directoryOrder.append(path) }
    }

    private func mode(_ entry: TarEntry) -> UInt32 { special ? entry.mode : entry.mode & 0o1777 }

    /// Owner (as root), mode, kept extended attributes, times: in that order, as chown clears
    /// set-ID bits and each change moves ctime.
    private func setAttributes(_ fd: Int32, _ entry: TarEntry) throws {
        if asRoot && fchown(fd, entry.uid, entry.gid) != 0 { throw failure(entry, "cannot set its owner", errno) }
        for (name, value) in entry.attributes {
            if name.hasPrefix("trusted.overlay.") || name.hasPrefix("user.overlay.") {
                throw LayerRefusal(entry: entry.name, rule: "the extended attribute \(name) is refused (overlay metadata)")
            }
            guard name.hasPrefix("user.") else { continue }
            let set = value.withUnsafeBytes { bytes in fsetxattr(fd, name, bytes.baseAddress, bytes.count, 0) }
            if set != 0 && errno != ENOTSUP { throw failure(entry, "cannot set its attribute \(name)", errno) }
        }
        guard fchmod(fd, mode_t(mode(entry))) == 0 else { throw failure(entry, "cannot set its mode", errno) }
        var times = LayerWriter.times(entry)
        guard futimens(fd, &times) == 0 else { throw failure(entry, "cannot set its times", errno) }
    }

    /// glibc's makedev, which Swift does not import.
    static func device(_ major: UInt32, _ minor: UInt32) -> dev_t {
        let major = UInt64(major), minor = UInt64(minor)
        return dev_t((major & 0xfffff000) << 32 | (major & 0xfff) << 8 | (minor & 0xffffff00) << 12 | (minor & 0xff))
    }

    private static func times(_ entry: TarEntry) -> [timespec] {
        let time = timespec(tv_sec: Int(entry.mtime.seconds), tv_nsec: entry.mtime.nanoseconds)
        return [time, time]
    }

    /// Removes what a later entry replaces (tar's rule: the last entry of a name wins); a
    /// directory over a directory merges.
    private func clear(_ parent: Int32, _ leaf: [UInt8], for entry: TarEntry) throws {
        var st = stat()
        guard leaf.withCStringCopy({ fstatat(parent, $0, &st, pb_AT_SYMLINK_NOFOLLOW) }) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            if entry.kind == .directory { return }
            try Tree.remove(parent, leaf)
        } else if leaf.withCStringCopy({ unlinkat(parent, $0, 0) }) != 0 {
            throw failure(entry, "cannot replace it", errno)
        }
    }

    /// A descriptor of the directory `path` under the root, made (0755) where missing when
    /// `create`. An entry's parent is owned by the writer (the last one is cached); a link
    /// target's parent (`linking`) is the caller's to close.
    private func openParent(_ path: ArraySlice<[UInt8]>, entry: [UInt8], create: Bool, linking: Bool = false) throws -> Int32 {
        if !linking, let cachedParent, cachedParent.path == path { return cachedParent.fd }
        var fd = dup(root)
        for part in path {
            var next = part.withCStringCopy { open(fd, $0) }
            if next < 0 && errno == ENOENT && create {
                _ = part.withCStringCopy { mkdirat(fd, $0, 0o755) }
                next = part.withCStringCopy { open(fd, $0) }
            }
            var error = errno
            var st = stat()
            if next < 0 && error == ENOTDIR && part.withCStringCopy({ fstatat(fd, $0, &st, pb_AT_SYMLINK_NOFOLLOW) }) == 0
                && st.st_mode & S_IFMT == S_IFLNK {
                error = ELOOP
            }
            close(fd)
            guard next >= 0 else {
                switch error {
                case ELOOP: throw LayerRefusal(entry: entry, rule: "a parent in its \(linking ? "link target" : "name") is a symlink")
                case ENOTDIR: throw LayerRefusal(entry: entry, rule: "a parent in its \(linking ? "link target" : "name") is not a directory")
                case ENOENT where linking: throw LayerRefusal(entry: entry, rule: "a hard link to a name not in the layer is refused")
                case EXDEV: throw LayerRefusal(entry: entry, rule: "its \(linking ? "link target" : "name") leaves the layer")
                default: throw DeliveryError("cannot open a parent of \(LayerRefusal(entry: entry, rule: DeliveryError.text(of: error)))")
                }
            }
            fd = next
        }
        if linking { return fd }
        dropCachedParent()
        cachedParent = (path, fd)
        return fd
    }

    private func open(_ dir: Int32, _ name: UnsafePointer<CChar>) -> Int32 {
        pb_openat2(dir, name, UInt64(O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC), 0,
                   pb_RESOLVE_BENEATH | pb_RESOLVE_NO_SYMLINKS)
    }

    private func dropCachedParent() {
        if let cachedParent { close(cachedParent.fd) }
        cachedParent = nil
    }

    private func failure(_ entry: TarEntry, _ what: String, _ error: Int32) -> DeliveryError {
        DeliveryError("\(LayerRefusal(entry: entry.name, rule: what + ": " + DeliveryError.text(of: error)))")
    }
}

extension Array where Element == UInt8 {
    /// `body` with the bytes as a NUL-terminated C string.
    func withCStringCopy<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try (self + [0]).withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress!) }
        }
    }
}
