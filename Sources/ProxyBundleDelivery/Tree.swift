import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// Removal of a directory tree through descriptors, never following a symlink: what a refused
/// or replaced layer leaves is removed without reaching outside it.
public enum Tree {
    static func remove(_ parent: Int32, _ name: [UInt8]) throws {
        var st = stat()
        guard name.withCStringCopy({ fstatat(parent, $0, &st, pb_AT_SYMLINK_NOFOLLOW) }) == 0 else {
            if errno == ENOENT { return }
            throw DeliveryError("cannot remove \(String(decoding: name, as: UTF8.self))", errno: errno)
        }
        if st.st_mode & S_IFMT == S_IFDIR {
            let fd = name.withCStringCopy {
                openat(parent, $0, O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC)
            }
            guard fd >= 0 else { throw DeliveryError("cannot open \(String(decoding: name, as: UTF8.self))", errno: errno) }
            fchmod(fd, 0o700)  // a layer's read-only directory, as its owner
            for child in try names(fd) { try remove(fd, child) }
            close(fd)
        }
        let flags = st.st_mode & S_IFMT == S_IFDIR ? AT_REMOVEDIR : 0
        guard name.withCStringCopy({ unlinkat(parent, $0, flags) }) == 0 || errno == ENOENT else {
            throw DeliveryError("cannot remove \(String(decoding: name, as: UTF8.self))", errno: errno)
        }
    }

    /// Removes a tree given by path (its last name relative to its parent's path).
    public static func remove(path: String) throws {
        let slash = path.lastIndex(of: "/")
        let parentPath = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let parent = open(parentPath, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard parent >= 0 else { return }
        defer { close(parent) }
        try remove(parent, Array(name.utf8))
    }

    /// The names in an open directory (not `.` and `..`), from its start, read by CSyscalls'
    /// one directory reader (this module does not import the core, whose `readDirectory`
    /// wraps the same); `fd` stays open.
    static func names(_ fd: Int32) throws -> [[UInt8]] {
        guard lseek(fd, 0, SEEK_SET) == 0, let reader = pb_directory_begin(fd) else {
            throw DeliveryError("cannot list a directory", errno: errno)
        }
        defer { pb_directory_end(reader) }
        var names: [[UInt8]] = []
        var entry = pb_directory_entry()
        while pb_directory_next(reader, &entry) == 1 {
            names.append(Array(UnsafeRawBufferPointer(start: entry.name, count: entry.length)))
        }
        return names
    }
}
