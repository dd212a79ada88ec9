import ProxyBundleCore
import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// Path helpers for the command line: arguments are checked and made absolute before the
/// daemon starts, so it never depends on its working directory. Paths are bytes throughout
/// (see `RawPath`).
enum Paths {
    /// The canonical absolute path of an existing entry (symlinks resolved).
    static func canonical(_ path: RawPath) -> RawPath? {
        guard let resolved = path.withCString({ realpath($0, nil) }) else { return nil }
        defer { free(resolved) }
        return RawPath(cString: resolved)
    }

    /// `path` made absolute against the working directory and normalised without touching
    /// the file system (works for a mountpoint whose daemon died).
    static func absolute(_ path: RawPath) -> RawPath {
        var base: [UInt8] = []
        if !path.isAbsolute, let cwd = getcwd(nil, 0) {
            base = RawPath(cString: cwd).bytes
            free(cwd)
        }
        let slash = UInt8(ascii: "/")
        var parts: [ArraySlice<UInt8>] = []
        for part in (base + [slash] + path.bytes).split(separator: slash) {
            if part.elementsEqual([0x2E]) { continue }
            if part.elementsEqual([0x2E, 0x2E]) { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return RawPath(bytes: [slash] + Array(parts.joined(separator: [slash])))
    }

    /// The canonical form of a path that may not exist yet: its deepest existing ancestor
    /// resolved, the rest appended.
    static func resolved(_ path: RawPath) -> RawPath {
        let absolute = absolute(path)
        if let canonical = canonical(absolute) { return canonical }
        if absolute == .root { return absolute }
        return resolved(absolute.parent).appending(absolute.lastName)
    }

    static func kind(_ path: RawPath) -> (exists: Bool, isDirectory: Bool, error: Int32) {
        var st = stat()
        if path.withCString({ stat($0, &st) }) != 0 { return (false, false, errno) }
        return (true, (st.st_mode & S_IFMT) == S_IFDIR, 0)
    }

    /// Creates `path` and any missing parents (mode 0755); `role` names it in the failure.
    static func makeDirectories(_ path: RawPath, role: String = "substitution directory") throws(Failure) {
        var current = RawPath.root
        for part in path.bytes.split(separator: UInt8(ascii: "/")) {
            current = current.appending(Array(part))
            if current.withCString({ mkdir($0, 0o755) }) != 0 && errno != EEXIST {
                throw Failure("cannot create \(role) \(path): \(Errno.current)")
            }
        }
    }

    /// The number of entries of directory `path` ("." and ".." aside); nil if it cannot be read.
    static func entryCount(_ path: RawPath) -> Int? {
        let fd = path.withCString { open($0, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var count = 0
        try? readDirectory(fd) { _ in count += 1 }
        return count
    }

    static func home() -> RawPath {
        if let home = getenv("HOME"), home.pointee != 0 { return RawPath(cString: home) }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return RawPath(cString: dir) }
        return .root
    }

    /// `${XDG_CACHE_HOME:-$HOME/.cache}/proxybundle/<basename of main>-<hash>/patch`, where the
    /// hash (8 hex digits) is of the main bundle's whole path: two bundles of the same name
    /// (`/x/A/Resources`, `/x/B/Resources`) get substitutions of their own. The basename is
    /// the main bundle's own bytes, UTF-8 or not.
    static func defaultSubstitution(forMain main: RawPath) -> RawPath {
        var cache = home().appending(".cache")
        if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee == UInt8(ascii: "/") { cache = RawPath(cString: xdg) }
        let name = main.lastName.isEmpty ? Array("root".utf8) : main.lastName
        return cache.appending("proxybundle").appending(name + Array("-\(shortHash(main))".utf8)).appending("patch")
    }

    /// 8 hex digits of the FNV-1a hash of `path`'s bytes: the same on every machine and run.
    static func shortHash(_ path: RawPath) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let hex = String(hash & 0xffff_ffff, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
