import Foundation

/// A fingerprint of a directory tree: every path with its type, mode, owner, size, mtime,
/// symlink target and content hash. Used to prove the main bundle is never modified.
enum TreeChecksum {
    static func of(_ root: String) throws -> String {
        var lines: [String] = []
        try walk(root, "", &lines)
        return lines.sorted().joined(separator: "\n")
    }

    private static func walk(_ root: String, _ relative: String, _ lines: inout [String]) throws {
        let path = relative.isEmpty ? root : root + "/" + relative
        var st = stat()
        guard lstat(path, &st) == 0 else { throw TestFailure("lstat \(path): \(errno)") }
        // ctime changes with any write, chmod, chown or xattr change, even one that restores mtime
        var line = "\(relative)|\(st.st_mode)|\(st.st_uid):\(st.st_gid)|\(st.st_size)|\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
            + "|\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
        switch st.st_mode & S_IFMT {
        case S_IFLNK:
            line += "|" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")
        case S_IFREG where st.st_size <= 16 << 20:
            line += "|" + String(try ContentHash.of(path), radix: 16)
        case S_IFDIR:
            for name in try FileManager.default.contentsOfDirectory(atPath: path) {
                try walk(root, relative.isEmpty ? name : relative + "/" + name, &lines)
            }
        default:
            line += "|\(st.st_rdev)"
        }
        lines.append(line)
    }
}

/// FNV-1a over a file's bytes (8 at a time), read in large chunks.
enum ContentHash {
    static func of(_ path: String) throws -> UInt64 {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): \(errno)") }
        defer { close(fd) }
        var hash: UInt64 = 0xcbf29ce484222325
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 { throw TestFailure("read \(path): \(errno)") }
            if count == 0 { break }
            buffer.withUnsafeBytes { raw in
                var i = 0
                while i + 8 <= count {
                    hash = (hash ^ raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0x100000001b3
                    i += 8
                }
                while i < count {
                    hash = (hash ^ UInt64(raw[i])) &* 0x100000001b3
                    i += 1
                }
            }
        }
        return hash
    }
}
