#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// Thin wrappers over the system calls the overlay makes: each retries on EINTR and turns
/// failure into a thrown `Errno`. Nothing here knows about layers or whiteouts.
///
/// The folder `System/` owns what the rest stands on: system calls, error numbers, locks,
/// raw paths and the mount table.
enum Sys {
    @inline(__always)
    static func check(_ body: () -> Int32) throws(Errno) -> Int32 {
        LockOrder.willCallSystem()
        while true {
            let result = body()
            if result >= 0 { return result }
            if errno != EINTR { throw Errno.current }
        }
    }

    @inline(__always)
    static func checkSize(_ body: () -> Int) throws(Errno) -> Int {
        LockOrder.willCallSystem()
        while true {
            let result = body()
            if result >= 0 { return result }
            if errno != EINTR { throw Errno.current }
        }
    }

    static func close(_ fd: Int32) {
        LockOrder.willCallSystem("close")
        _ = Glibc.close(fd)  // never retried: the descriptor is gone either way
    }

    static func openat2(_ dirfd: Int32, _ path: UnsafePointer<CChar>, flags: Int32,
                        mode: mode_t = 0, resolve: UInt64) throws(Errno) -> Int32 {
        try check { pb_openat2(dirfd, path, UInt64(UInt32(bitPattern: flags)), UInt64(mode), resolve) }
    }

    static func lstatat(_ dirfd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> stat {
        var st = stat()
        _ = try check { fstatat(dirfd, name, &st, pb_AT_SYMLINK_NOFOLLOW) }
        return st
    }

    static func fstat(_ fd: Int32) throws(Errno) -> stat {
        var st = stat()
        _ = try check { Glibc.fstat(fd, &st) }
        return st
    }

    /// The target of the symlink `name` in `dirfd` (or of `dirfd` itself when `name` is "").
    static func readlinkat(_ dirfd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        var capacity = 256
        while true {
            var buffer = [CChar](repeating: 0, count: capacity)
            let count = try checkSize { Glibc.readlinkat(dirfd, name, &buffer, capacity) }
            if count < capacity {
                return buffer[..<count].map { UInt8(bitPattern: $0) }
            }
            capacity *= 4
            if capacity > 1 << 20 { throw Errno.nameTooLong }
        }
    }

    /// Extended attributes through `/proc/self/fd/N`: works on O_PATH descriptors, and opens
    /// nothing (no device side effects, no atime).
    static func withProcPath<T>(_ fd: Int32, _ body: (UnsafePointer<CChar>) throws(Errno) -> T) throws(Errno) -> T {
        try Array("/proc/self/fd/\(fd)".utf8).withCStringCopy(body)
    }

    /// The whole value of one extended attribute of the file behind `fd`.
    static func getxattr(fd: Int32, name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        try withProcPath(fd) { (path: UnsafePointer<CChar>) throws(Errno) -> [UInt8] in
            try readSized { buffer, size in CSyscalls.getxattr(path, name, buffer, size) }
        }
    }

    /// The NUL-separated attribute names of the file behind `fd`.
    static func listxattr(fd: Int32) throws(Errno) -> [UInt8] {
        try withProcPath(fd) { (path: UnsafePointer<CChar>) throws(Errno) -> [UInt8] in
            try readSized { buffer, size in
                CSyscalls.listxattr(path, buffer?.assumingMemoryBound(to: CChar.self), size)
            }
        }
    }

    /// Whether this kernel has getxattrat and listxattrat (Linux 6.13).
    static let hasAttributeCallsAt: Bool = {
        pb_getxattrat(AT_FDCWD, "/", "user.proxybundle.probe", nil, 0) >= 0 || errno != ENOSYS
    }()

    /// The whole value of one extended attribute of entry `name` of directory `dirfd` (not
    /// following a symlink); needs `hasAttributeCallsAt`.
    static func getxattr(in dirfd: Int32, _ name: UnsafePointer<CChar>, attribute: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        try readSized { buffer, size in pb_getxattrat(dirfd, name, attribute, buffer, size) }
    }

    /// The NUL-separated attribute names of entry `name` of directory `dirfd`.
    static func listxattr(in dirfd: Int32, _ name: UnsafePointer<CChar>) throws(Errno) -> [UInt8] {
        try readSized { buffer, size in pb_listxattrat(dirfd, name, buffer?.assumingMemoryBound(to: CChar.self), size) }
    }

    /// Copies the extended attributes of entry `name` of `sourceDir` to entry `target` of
    /// `targetDir`, neither followed if a symlink: for the entries that cannot be opened to
    /// copy them (a symlink, a FIFO, a device). Nothing before Linux 6.13; attributes the file
    /// system or our privileges refuse (`user.*` on a symlink) are skipped.
    static func copyExtendedAttributes(of name: UnsafePointer<CChar>, in sourceDir: Int32,
                                       to target: UnsafePointer<CChar>, in targetDir: Int32) {
        guard hasAttributeCallsAt, let names = try? listxattr(in: sourceDir, name) else { return }
        copyAttributes(named: names, read: { try? getxattr(in: sourceDir, name, attribute: $0) },
                       write: { key, value in _ = pb_setxattrat(targetDir, target, key, value, value.count) })
    }

    /// Copies each attribute `names` (NUL-separated) lists that `read` can read, with `write`;
    /// what the file system or our privileges refuse is skipped.
    static func copyAttributes(named names: [UInt8], read: (UnsafePointer<CChar>) -> [UInt8]?,
                               write: (UnsafePointer<CChar>, [UInt8]) -> Void) {
        for attribute in names.split(separator: 0) {
            Array(attribute).withCStringCopy { (key: UnsafePointer<CChar>) in
                guard let value = read(key) else { return }
                write(key, value)
            }
        }
    }

    /// Calls a "size query, then fill" style function until the value fits.
    private static func readSized(_ call: (UnsafeMutableRawPointer?, Int) -> Int) throws(Errno) -> [UInt8] {
        while true {
            let needed = try checkSize { call(nil, 0) }
            if needed == 0 { return [] }
            var buffer = [UInt8](repeating: 0, count: needed)
            let count = buffer.withUnsafeMutableBytes { call($0.baseAddress, needed) }
            if count >= 0 {
                buffer.removeSubrange(count...)
                return buffer
            }
            if errno != ERANGE && errno != EINTR { throw Errno.current }
        }
    }
}

/// Every entry of the directory open as `fd`, from its offset on, without "." and "..", in the
/// order the file system gives them: CSyscalls' one reader of directories, which every module
/// uses (ProxyBundleDelivery, which does not import the core, calls it directly). `fd` stays
/// open; an entry's name is valid only while `visit` runs.
public func readDirectory(_ fd: Int32, _ visit: (pb_directory_entry) -> Void) throws(Errno) {
    guard let reader = pb_directory_begin(fd) else { throw Errno.current }
    defer { pb_directory_end(reader) }
    var entry = pb_directory_entry()
    while true {
        switch pb_directory_next(reader, &entry) {
        case 1: visit(entry)
        case 0: return
        default: throw Errno.current
        }
    }
}

extension pb_directory_entry {
    /// The name's bytes (no NUL), valid only while the entry is visited.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: name, count: length) }
}
