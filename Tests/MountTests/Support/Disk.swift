import Foundation

/// Small helpers to build layers on disk and to look at the mount with plain syscalls.
enum Disk {
    static func write(_ path: String, _ content: String, mode: mode_t = 0o644) throws {
        try makeParent(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard fd >= 0 else { throw TestFailure("create \(path): \(errno)") }
        defer { close(fd) }
        let bytes = Array(content.utf8)
        guard Glibc.write(fd, bytes, bytes.count) == bytes.count else { throw TestFailure("write \(path): \(errno)") }
        _ = fchmod(fd, mode)
    }

    static func mkdir(_ path: String, mode: mode_t = 0o755) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        _ = chmod(path, mode)
    }

    static func symlink(_ path: String, to target: String) throws {
        try makeParent(path)
        guard Glibc.symlink(target, path) == 0 else { throw TestFailure("symlink \(path): \(errno)") }
    }

    /// An OCI whiteout for `name` in the directory `dir`.
    static func whiteout(_ dir: String, _ name: String) throws {
        try write(dir + "/.wh." + name, "")
    }

    static func opaque(_ dir: String) throws {
        try write(dir + "/.wh..wh..opq", "")
    }

    static func makeParent(_ path: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
    }

    static func read(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        return try readAll(fd, path)
    }

    /// What is left to read from `fd`, as text.
    static func readAll(_ fd: Int32, _ path: String = "descriptor") throws -> String {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &chunk, chunk.count)
            if n < 0 { throw TestFailure("read \(path): errno \(errno)") }
            if n == 0 { break }
            data.append(contentsOf: chunk[..<n])
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The names of a directory through readdir(3), "." and ".." excluded, in returned order
    /// (the mount's control files are never listed).
    static func list(_ path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw TestFailure("opendir \(path): errno \(errno)") }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func lstat(_ path: String) -> stat? {
        var st = stat()
        return Glibc.lstat(path, &st) == 0 ? st : nil
    }

    /// errno of lstat, or 0 when it succeeds.
    static func lstatError(_ path: String) -> Int32 {
        var st = stat()
        return Glibc.lstat(path, &st) == 0 ? 0 : errno
    }

    static func readLink(_ path: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }
}
