import CSyscalls
import Foundation

/// Layers applied as OCI image layers (the image-spec's "Applying Changesets"): each over a
/// copy of the ones below, its whiteouts first (`.wh.NAME` deletes NAME below, `.wh..wh..opq`
/// the directory's entries below; a 0/0 character device is overlayfs' form of `.wh.NAME`),
/// then its entries (a directory merges with one below, anything else replaces). Nothing of
/// the daemon's code: what a tool that unpacks the layers as an image gets.
enum OCILayers {
    /// The tree the layers (bottom first) make, built in `target` (which must not exist).
    static func apply(_ layers: [String], into target: String) throws {
        try Disk.mkdir(target)
        for layer in layers { try apply(layer, onto: target) }
    }

    /// Where the tree the layers make differs from the one at `shown`, in names, kinds, file
    /// contents and symlink targets; empty when they agree.
    static func differences(_ layers: [String], shown: String, scratch: String) throws -> [String] {
        try? FileManager.default.removeItem(atPath: scratch)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try apply(layers, into: scratch)
        let applied = try entries(scratch), mounted = try entries(shown)
        let differing = Set(applied.keys).union(mounted.keys).sorted().compactMap { path in
            applied[path] == mounted[path] ? nil
                : "\(path): as OCI layers \(applied[path] ?? "absent"), through the mount \(mounted[path] ?? "absent")"
        }
        guard let top = layers.last else { return differing }
        let ambiguous = try entries(top).keys.sorted().compactMap { path -> String? in
            let (directory, name) = path.lastIndex(of: "/").map { (String(path[...$0]), String(path[path.index(after: $0)...])) }
                ?? ("", path)
            guard name.hasPrefix(".wh."), !name.hasPrefix(".wh..wh."), Disk.lstat(top + "/" + directory + name.dropFirst(4)) != nil
            else { return nil }
            return "\(directory + name.dropFirst(4)): the top layer holds both it and its whiteout \(path)"
        }
        return differing + ambiguous
    }

    private static func apply(_ layer: String, onto target: String) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: layer)
        if names.contains(".wh..wh..opq") {
            for below in try FileManager.default.contentsOfDirectory(atPath: target) { try remove(target + "/" + below) }
        }
        var entries: [String] = []
        for name in names {
            if name.hasPrefix(".wh..wh.") { continue }  // the opaque marker, or the daemon's work directory
            if name.hasPrefix(".wh.") {
                try remove(target + "/" + name.dropFirst(4))
                continue
            }
            if let st = Disk.lstat(layer + "/" + name), st.st_mode & S_IFMT == S_IFCHR, st.st_rdev == 0 {
                try remove(target + "/" + name)
                continue
            }
            entries.append(name)
        }
        for name in entries {
            let from = layer + "/" + name, to = target + "/" + name
            guard let st = Disk.lstat(from) else { continue }
            if st.st_mode & S_IFMT == S_IFDIR {
                if let below = Disk.lstat(to), below.st_mode & S_IFMT != S_IFDIR { try remove(to) }
                if Disk.lstat(to) == nil { try Disk.mkdir(to) }
                try apply(from, onto: to)
            } else {
                try remove(to)
                if st.st_mode & S_IFMT == S_IFLNK {
                    try FileManager.default.createSymbolicLink(atPath: to, withDestinationPath: Disk.readLink(from) ?? "")
                } else if st.st_mode & S_IFMT == S_IFREG {
                    try FileManager.default.copyItem(atPath: from, toPath: to)
                } else {
                    guard mknod(to, st.st_mode, st.st_rdev) == 0 else { throw TestFailure("mknod \(to): errno \(errno)") }
                }
            }
        }
    }

    private static func remove(_ path: String) throws {
        guard Disk.lstat(path) != nil else { return }
        try FileManager.default.removeItem(atPath: path)
    }

    /// Every entry below `root`: its kind, and a file's content or a symlink's target.
    private static func entries(_ root: String) throws -> [String: String] {
        var result: [String: String] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let dir = relative.isEmpty ? root : root + "/" + relative
            for name in try FileManager.default.contentsOfDirectory(atPath: dir) {
                let path = relative.isEmpty ? name : relative + "/" + name
                guard let st = Disk.lstat(root + "/" + path) else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR:
                    result[path] = "directory"
                    pending.append(path)
                case S_IFLNK: result[path] = "symlink to \(Disk.readLink(root + "/" + path) ?? "?")"
                case S_IFREG:
                    let data = FileManager.default.contents(atPath: root + "/" + path) ?? Data()
                    result[path] = "file of \(data.count) bytes, hash \(data.reduce(UInt64(14695981039346656037)) { ($0 ^ UInt64($1)) &* 1099511628211 })"
                default: result[path] = "special 0\(String(st.st_mode, radix: 8))"
                }
            }
        }
        return result
    }
}
