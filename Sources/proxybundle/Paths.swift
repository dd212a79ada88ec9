import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// Path helpers for the command line: arguments are checked and made absolute before the
/// daemon starts, so it never depends on its working directory.
enum Paths {
    /// The canonical absolute path of an existing entry (symlinks resolved).
    static func canonical(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `path` made absolute against the working directory and normalised without touching
    /// the file system (works for a mountpoint whose daemon died).
    static func absolute(_ path: String) -> String {
        var base = ""
        if !path.hasPrefix("/"), let cwd = getcwd(nil, 0) {
            base = String(cString: cwd)
            free(cwd)
        }
        var parts: [Substring] = []
        for part in (base + "/" + path).split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The canonical form of a path that may not exist yet: its deepest existing ancestor
    /// resolved, the rest appended.
    static func resolved(_ path: String) -> String {
        let absolute = absolute(path)
        if let canonical = canonical(absolute) { return canonical }
        guard let slash = absolute.lastIndex(of: "/"), absolute != "/" else { return absolute }
        let parent = slash == absolute.startIndex ? "/" : String(absolute[..<slash])
        let base = resolved(parent)
        return (base == "/" ? "" : base) + "/" + absolute[absolute.index(after: slash)...]
    }

    /// Whether `path` is `ancestor` or lies beneath it (both canonical).
    static func isInside(_ path: String, _ ancestor: String) -> Bool {
        path == ancestor || ancestor == "/" || path.hasPrefix(ancestor + "/")
    }

    static func kind(_ path: String) -> (exists: Bool, isDirectory: Bool, error: Int32) {
        var st = stat()
        if stat(path, &st) != 0 { return (false, false, errno) }
        return (true, (st.st_mode & S_IFMT) == S_IFDIR, 0)
    }

    /// Creates `path` and any missing parents (mode 0755); `role` names it in the failure.
    static func makeDirectories(_ path: String, role: String = "substitution directory") throws(Failure) {
        var current = ""
        for part in path.split(separator: "/") {
            current += "/" + part
            if mkdir(current, 0o755) != 0 && errno != EEXIST {
                throw Failure("cannot create \(role) \(path): \(describe(errno))")
            }
        }
    }

    /// The number of entries of directory `path` ("." and ".." aside); nil if it cannot be read.
    static func entryCount(_ path: String) -> Int? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = String(cString: directoryEntryName(entry))
            if name != "." && name != ".." { count += 1 }
        }
        return count
    }

    static func describe(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }

    static func home() -> String {
        if let home = getenv("HOME"), home.pointee != 0 { return String(cString: home) }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }

    /// `${XDG_CACHE_HOME:-$HOME/.cache}/proxybundle/<basename of main>-<hash>/patch`, where the
    /// hash (8 hex digits) is of the main bundle's whole path: two bundles of the same name
    /// (`/x/A/Resources`, `/x/B/Resources`) get substitutions of their own.
    static func defaultSubstitution(forMain main: String) -> String {
        var cache = home() + "/.cache"
        if let xdg = getenv("XDG_CACHE_HOME"), xdg.pointee == UInt8(ascii: "/") { cache = String(cString: xdg) }
        let name = main.split(separator: "/").last.map(String.init) ?? "root"
        return cache + "/proxybundle/" + name + "-" + shortHash(main) + "/patch"
    }

    /// 8 hex digits of the FNV-1a hash of `text`'s bytes: the same on every machine and run.
    static func shortHash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        let hex = String(hash & 0xffff_ffff, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
