import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// A substitution or patch directory written as one OCI layer tar: names sorted byte by byte,
/// each directory's whiteouts first (as the image-spec asks), overlayfs' whiteout forms
/// (a 0/0 character device, an `overlay.opaque` attribute) written as OCI's `.wh.NAME` and
/// `.wh..wh..opq`, hard links as links to the first name, `user.*` attributes as PAX records.
/// The daemon's reserved `.wh..wh.*` names (its work directory) are left out. Reproducible:
/// owners 0 and every time the same (SOURCE_DATE_EPOCH, or 0).
struct LayerSource {
    let reproducible: Bool
    private let fixedTime: Int64
    private var linked: [String: [UInt8]] = [:]

    init(reproducible: Bool) {
        self.reproducible = reproducible
        fixedTime = getenv("SOURCE_DATE_EPOCH").flatMap { Int64(String(cString: $0)) } ?? 0
    }

    static let opaqueMarker = Array(".wh..wh..opq".utf8)
    static let whiteoutPrefix = Array(".wh.".utf8)

    mutating func write(_ directory: String, to writer: TarWriter) throws {
        let root = open(directory, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard root >= 0 else { throw DeliveryError("cannot open \(directory)", errno: errno) }
        defer { close(root) }
        var st = stat()
        guard fstat(root, &st) == 0 else { throw DeliveryError("cannot stat \(directory)") }
        try writer.write(entry(Array("./".utf8), st, kind: .directory, attributes: LayerSource.attributes(root)))
        try walk(root, prefix: [], writer: writer, opaque: LayerSource.isOpaque(root))
        try writer.finish()
    }

    private mutating func walk(_ dir: Int32, prefix: [UInt8], writer: TarWriter, opaque: Bool) throws {
        var names = try Tree.names(dir).filter { !$0.starts(with: Array(".wh..wh.".utf8)) || $0 == LayerSource.opaqueMarker }
        if opaque && !names.contains(LayerSource.opaqueMarker) { names.append(LayerSource.opaqueMarker) }
        var whiteouts: [[UInt8]] = [], others: [[UInt8]] = []
        for name in names {
            var st = stat()
            let found = name.withCStringCopy { fstatat(dir, $0, &st, pb_AT_SYMLINK_NOFOLLOW) } == 0
            if name.starts(with: LayerSource.whiteoutPrefix) { whiteouts.append(name) }
            else if found && st.st_mode & S_IFMT == S_IFCHR && st.st_rdev == 0 { whiteouts.append(LayerSource.whiteoutPrefix + name) }
            else { others.append(name) }
        }
        for name in Set(whiteouts).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let time = reproducible ? fixedTime : 0
            try writer.write(TarEntry(name: prefix + name, kind: .file, mode: 0o644, uid: 0, gid: 0, size: 0,
                                      mtime: (time, 0), link: [], device: (0, 0), attributes: []))
        }
        for name in others.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            try write(dir, name, path: prefix + name, writer: writer)
        }
    }

    private mutating func write(_ dir: Int32, _ name: [UInt8], path: [UInt8], writer: TarWriter) throws {
        var st = stat()
        guard name.withCStringCopy({ fstatat(dir, $0, &st, pb_AT_SYMLINK_NOFOLLOW) }) == 0 else {
            if errno == ENOENT { return }  // removed while the layer was written
            throw failure(path, "cannot stat it")
        }
        switch st.st_mode & S_IFMT {
        case S_IFDIR:
            let fd = name.withCStringCopy { openat(dir, $0, O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
            guard fd >= 0 else { throw failure(path, "cannot open it") }
            defer { close(fd) }
            try writer.write(entry(path + [UInt8(ascii: "/")], st, kind: .directory, attributes: LayerSource.attributes(fd)))
            try walk(fd, prefix: path + [UInt8(ascii: "/")], writer: writer, opaque: LayerSource.isOpaque(fd))
        case S_IFREG:
            let key = "\(st.st_dev):\(st.st_ino)"
            if st.st_nlink > 1, let first = linked[key] {
                var link = entry(path, st, kind: .hardLink, attributes: [])
                link.link = first
                try writer.write(link)
                return
            }
            if st.st_nlink > 1 { linked[key] = path }
            let fd = name.withCStringCopy { openat(dir, $0, O_RDONLY | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
            guard fd >= 0 else { throw failure(path, "cannot open it") }
            defer { close(fd) }
            var file = entry(path, st, kind: .file, attributes: LayerSource.attributes(fd))
            file.size = UInt64(st.st_size)
            try writer.write(file) { emit in
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                var left = Int(st.st_size)
                while left > 0 {
                    let n = read(fd, &buffer, min(buffer.count, left))
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { throw failure(path, "cannot read it (or it shrank)") }
                    try emit(Array(buffer[0..<n]))
                    left -= n
                }
            }
        case S_IFLNK:
            var buffer = [CChar](repeating: 0, count: 4097)
            let n = name.withCStringCopy { readlinkat(dir, $0, &buffer, buffer.count - 1) }
            guard n >= 0 else { throw failure(path, "cannot read the link") }
            var link = entry(path, st, kind: .symlink, attributes: [])
            link.link = buffer[0..<n].map { UInt8(bitPattern: $0) }
            try writer.write(link)
        case S_IFCHR, S_IFBLK, S_IFIFO:
            let kind: TarEntry.Kind = st.st_mode & S_IFMT == S_IFIFO ? .fifo : st.st_mode & S_IFMT == S_IFBLK ? .blockDevice : .characterDevice
            var node = entry(path, st, kind: kind, attributes: [])
            node.device = (UInt32(truncatingIfNeeded: (st.st_rdev >> 8) & 0xfff | (st.st_rdev >> 32) & ~0xfff),
                           UInt32(truncatingIfNeeded: st.st_rdev & 0xff | (st.st_rdev >> 12) & ~0xff))
            try writer.write(node)
        default:
            return  // sockets: nothing a layer holds
        }
    }

    private func entry(_ path: [UInt8], _ st: stat, kind: TarEntry.Kind, attributes: [(name: String, value: [UInt8])]) -> TarEntry {
        TarEntry(name: path, kind: kind, mode: UInt32(st.st_mode & 0o7777), uid: reproducible ? 0 : st.st_uid,
                 gid: reproducible ? 0 : st.st_gid, size: 0,
                 mtime: reproducible ? (fixedTime, 0) : (Int64(st.st_mtim.tv_sec), st.st_mtim.tv_nsec),
                 link: [], device: (0, 0), attributes: attributes)
    }

    private func failure(_ path: [UInt8], _ what: String) -> DeliveryError {
        DeliveryError("\(String(decoding: path, as: UTF8.self)): \(what)", errno: errno)
    }

    /// The `user.*` attributes of an open file, but overlay metadata.
    static func attributes(_ fd: Int32) -> [(name: String, value: [UInt8])] {
        var list = [CChar](repeating: 0, count: 65536)
        let size = flistxattr(fd, &list, list.count)
        guard size > 0 else { return [] }
        let names = list[0..<size].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return names.filter { $0.hasPrefix("user.") && !$0.hasPrefix("user.overlay.") }.sorted().compactMap { name in
            var value = [UInt8](repeating: 0, count: 65536)
            let length = fgetxattr(fd, name, &value, value.count)
            return length >= 0 ? (name, Array(value[0..<length])) : nil
        }
    }

    /// Opaque in overlayfs' forms (`trusted.` or `user.overlay.opaque` = y).
    static func isOpaque(_ fd: Int32) -> Bool {
        ["trusted.overlay.opaque", "user.overlay.opaque"].contains { name in
            var value: UInt8 = 0
            return fgetxattr(fd, name, &value, 1) == 1 && value == UInt8(ascii: "y")
        }
    }
}
