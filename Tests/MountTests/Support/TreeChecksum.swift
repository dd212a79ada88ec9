import CSyscalls
import Foundation

/// A fingerprint of a directory tree: every path with its type, mode, owner, size, mtime,
/// symlink target and content hash. Used to prove the main bundle is never modified.
enum TreeChecksum {
    static func of(_ root: String) throws -> String {
        var lines: [String] = []
        let fd = open(root, O_RDONLY | O_DIRECTORY)
        guard fd >= 0 else { throw TestFailure("open \(root): \(errno)") }
        defer { close(fd) }
        try walk(fd, root, [], &lines)
        return lines.sorted().joined(separator: "\n")
    }

    /// Works on paths as bytes: names need not be UTF-8 (HostileInputTests puts such names in
    /// the main bundle). Each entry is reached relative to its directory's descriptor, so trees
    /// deeper than PATH_MAX are walked too (LongPathTests puts one in the main bundle).
    private static func walk(_ dirfd: Int32, _ root: String, _ relative: [UInt8], _ lines: inout [String]) throws {
        let name = relative.isEmpty ? [0x2E] : Array(relative.split(separator: 0x2F, omittingEmptySubsequences: false).last ?? [])
        let shown = String(decoding: relative, as: UTF8.self) + (String(validating: relative, as: UTF8.self) == nil
            ? "#" + relative.map { String($0, radix: 16) }.joined() : "")
        var st = stat()
        guard withCName(name, { fstatat(dirfd, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            throw TestFailure("lstat \(root)/\(shown): \(errno)")
        }
        // ctime changes with any write, chmod, chown or xattr change, even one that restores mtime
        var line = "\(shown)|\(st.st_mode)|\(st.st_uid):\(st.st_gid)|\(st.st_size)|\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
            + "|\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
        switch st.st_mode & S_IFMT {
        case S_IFLNK:
            var target = [UInt8](repeating: 0, count: 4097)
            let count = withCName(name) { p in target.withUnsafeMutableBufferPointer { readlinkat(dirfd, p, $0.baseAddress!, 4096) } }
            line += "|" + (count >= 0 ? String(decoding: target[..<count], as: UTF8.self) : "?")
        case S_IFREG where st.st_size <= 16 << 20:
            // read without touching the access time (the tests check that the mount does not)
            var fd = withCName(name) { openat(dirfd, $0, O_RDONLY | pb_O_NOATIME) }
            if fd < 0 && errno == EPERM { fd = withCName(name) { openat(dirfd, $0, O_RDONLY) } }
            guard fd >= 0 else { throw TestFailure("open \(root)/\(shown): \(errno)") }
            defer { close(fd) }
            line += "|" + String(try ContentHash.of(fd: fd), radix: 16)
        case S_IFDIR:
            let child = withCName(name) { openat(dirfd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) }
            guard child >= 0, let dir = fdopendir(dup(child)) else { throw TestFailure("opendir \(root)/\(shown): \(errno)") }
            defer { close(child) }
            var names: [[UInt8]] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
            }
            closedir(dir)
            for name in names { try walk(child, root, relative.isEmpty ? name : relative + [0x2F] + name, &lines) }
        default:
            line += "|\(st.st_rdev)"
        }
        lines.append(line)
    }

    private static func withCName<T>(_ name: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (name + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) } }
    }
}

/// FNV-1a over a file's bytes (8 at a time), read in large chunks.
enum ContentHash {
    static func of(_ path: String) throws -> UInt64 {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): \(errno)") }
        defer { close(fd) }
        return try of(fd: fd)
    }

    static func of(fd: Int32) throws -> UInt64 {
        var hash: UInt64 = 0xcbf29ce484222325
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 { throw TestFailure("read: \(errno)") }
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
