import Foundation

/// Looking at whole trees and file contents with plain syscalls, for tests that compare what a
/// mount shows before and after something went wrong.
enum Probe {
    /// Every path below `root` (relative, without the root's control files) with its lstat.
    static func walk(_ root: String) throws -> [String: stat] {
        var result: [String: stat] = [:]
        func visit(_ relative: String) throws {
            let path = relative.isEmpty ? root : root + "/" + relative
            for name in try Disk.list(path) {
                let child = relative.isEmpty ? name : relative + "/" + name
                guard let st = Disk.lstat(root + "/" + child) else { throw TestFailure("lstat \(root)/\(child): errno \(errno)") }
                result[child] = st
                if st.st_mode & S_IFMT == S_IFDIR { try visit(child) }
            }
        }
        try visit("")
        return result
    }

    /// A tree as `path -> description`: directories as "dir", symlinks as "-> target", files as
    /// their content hash and size (modes included when `modes` is set).
    static func describe(_ root: String, modes: Bool = false) throws -> [String: String] {
        var result: [String: String] = [:]
        for (path, st) in try walk(root) {
            let mode = modes ? " \(String(st.st_mode & 0o7777, radix: 8))" : ""
            switch st.st_mode & S_IFMT {
            case S_IFDIR: result[path] = "dir" + mode
            case S_IFLNK: result[path] = "-> " + (Disk.readLink(root + "/" + path) ?? "?")
            case S_IFREG: result[path] = "file \(st.st_size) \(String(try ContentHash.of(root + "/" + path), radix: 16))" + mode
            default: result[path] = "special \(st.st_mode & S_IFMT)"
            }
        }
        return result
    }

    /// The paths on which two descriptions differ, each as "path: left | right".
    static func differences(_ left: [String: String], _ right: [String: String]) -> [String] {
        Set(left.keys).union(right.keys).sorted().compactMap { path in
            left[path] == right[path] ? nil : "\(path): \(left[path] ?? "missing") | \(right[path] ?? "missing")"
        }
    }

    /// The whole content of a file, nil when it cannot be opened.
    static func bytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 { return nil }
            if n == 0 { return data }
            data.append(contentsOf: chunk[..<n])
        }
    }

    /// Whether the first `length` bytes of two files are equal (both must have them), read in
    /// large chunks and compared with memcmp (fast enough for hundreds of MiB in a debug build).
    static func samePrefix(_ a: String, _ b: String, length: Int) throws -> Bool {
        let fa = open(a, O_RDONLY), fb = open(b, O_RDONLY)
        defer { if fa >= 0 { close(fa) }; if fb >= 0 { close(fb) } }
        guard fa >= 0, fb >= 0 else { throw TestFailure("open \(fa < 0 ? a : b): errno \(errno)") }
        let size = 4 << 20
        var left = [UInt8](repeating: 0, count: size), right = [UInt8](repeating: 0, count: size)
        var offset = 0
        while offset < length {
            let want = min(size, length - offset)
            let na = pread(fa, &left, want, off_t(offset)), nb = pread(fb, &right, want, off_t(offset))
            guard na == want, nb == want else { return false }
            if memcmp(left, right, want) != 0 { return false }
            offset += want
        }
        return true
    }

    /// The substitution's copy-up work directory's entries, nil when it does not exist.
    static func workEntries(_ fx: MountFixture) -> [String]? {
        try? Disk.list(fx.inSubstitution(".wh..wh.work"))
    }

    /// What is left in the work directory: nothing when there is none (it is made when needed).
    static func workLeftovers(_ fx: MountFixture) -> [String] {
        workEntries(fx) ?? []
    }

    /// Every visible path whose last component begins with `.wh.` (must be none).
    static func whiteoutNames(in tree: [String: stat]) -> [String] {
        tree.keys.filter { ($0.split(separator: "/").last ?? "").hasPrefix(".wh.") }.sorted()
    }

    /// Removes everything inside `directory`, keeping the directory itself.
    static func empty(_ directory: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            try FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }
}
