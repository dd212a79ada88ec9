import CSyscalls
import Foundation

/// Layers applied as OCI image layers (the image-spec's "Applying Changesets"): each over a
/// copy of the ones below, its whiteouts first (`.wh.NAME` deletes NAME below, `.wh..wh..opq`
/// the directory's entries below; a 0/0 character device is overlayfs' form of `.wh.NAME`),
/// then its entries (a directory merges with one below and takes the layer's attributes,
/// anything else replaces), with what an archive of the layer keeps: mode, owner, modification
/// time, extended attributes, and hard links between the layer's own names. Nothing of the
/// daemon's code: what a tool that unpacks the layers as an image gets.
enum OCILayers {
    /// Extended attributes of overlay implementations, which no image carries.
    static let privateAttributePrefixes = ["trusted.overlay.", "user.overlay."]

    /// The tree the layers (bottom first) make, built in `target` (which must not exist).
    static func apply(_ layers: [String], into target: String) throws {
        try Disk.mkdir(target)
        for layer in layers {
            var linked: [String: String] = [:]
            try apply(layer, onto: target, linked: &linked)
        }
    }

    /// Where the tree the layers make differs from the one at `shown`, compared as
    /// `OverlayTree.differences` compares two mounts; empty when they agree. A name held beside
    /// its own whiteout in the top layer counts as a difference too.
    static func differences(_ layers: [String], shown: String, scratch: String) throws -> [String] {
        try? FileManager.default.removeItem(atPath: scratch)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try apply(layers, into: scratch)
        let differing = OverlayTree.differences(try OverlayTree.walk(scratch), try OverlayTree.walk(shown),
                                                leftName: "as OCI layers", rightName: "the mount")
        guard let top = layers.last else { return differing }
        let ambiguous = try OverlayTree.walk(top).keys.sorted().compactMap { path -> String? in
            let (directory, name) = path.lastIndex(of: "/").map { (String(path[...$0]), String(path[path.index(after: $0)...])) }
                ?? ("", path)
            guard name.hasPrefix(".wh."), !name.hasPrefix(".wh..wh."), Disk.lstat(top + "/" + directory + name.dropFirst(4)) != nil
            else { return nil }
            return "\(directory + name.dropFirst(4)): the top layer holds both it and its whiteout \(path)"
        }
        return differing + ambiguous
    }

    /// Applies the directory `layer` onto `target`; `linked` maps the layer's inodes with more
    /// than one link to the first path made for them.
    private static func apply(_ layer: String, onto target: String, linked: inout [String: String]) throws {
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
                try apply(from, onto: to, linked: &linked)
                continue
            }
            try remove(to)
            let inode = "\(st.st_dev):\(st.st_ino)"
            if st.st_nlink > 1, let first = linked[inode] {
                guard link(first, to) == 0 else { throw TestFailure("link \(to): errno \(errno)") }
                continue
            }
            switch st.st_mode & S_IFMT {
            case S_IFLNK: try FileManager.default.createSymbolicLink(atPath: to, withDestinationPath: Disk.readLink(from) ?? "")
            case S_IFREG: try FileManager.default.copyItem(atPath: from, toPath: to)
            default: guard mknod(to, st.st_mode, st.st_rdev) == 0 else { throw TestFailure("mknod \(to): errno \(errno)") }
            }
            try copyAttributes(st, of: from, to: to)
            if st.st_nlink > 1 { linked[inode] = to }
        }
        // a directory's own attributes last, as archivers set them, once its entries are made
        guard let st = Disk.lstat(layer) else { throw TestFailure("lstat \(layer): errno \(errno)") }
        try copyAttributes(st, of: layer, to: target)
    }

    /// Gives `to` the owner, mode, extended attributes (and no others) and times of `from`.
    private static func copyAttributes(_ st: stat, of from: String, to: String) throws {
        guard lchown(to, st.st_uid, st.st_gid) == 0 else { throw TestFailure("lchown \(to): errno \(errno)") }
        if st.st_mode & S_IFMT != S_IFLNK {
            guard chmod(to, st.st_mode & 0o7777) == 0 else { throw TestFailure("chmod \(to): errno \(errno)") }
        }
        let wanted = attributeNames(from).filter { name in !privateAttributePrefixes.contains { name.hasPrefix($0) } }
        for name in attributeNames(to) where !wanted.contains(name) { _ = lremovexattr(to, name) }
        for name in wanted {
            var value = [UInt8](repeating: 0, count: 65536)
            let size = lgetxattr(from, name, &value, value.count)
            guard size >= 0, lsetxattr(to, name, value, size, 0) == 0 else {
                throw TestFailure("copying xattr \(name) to \(to): errno \(errno)")
            }
        }
        var times = [st.st_atim, st.st_mtim]
        guard utimensat(AT_FDCWD, to, &times, AT_SYMLINK_NOFOLLOW) == 0 else { throw TestFailure("utimensat \(to): errno \(errno)") }
    }

    private static func attributeNames(_ path: String) -> [String] {
        var buffer = [CChar](repeating: 0, count: 65536)
        let length = llistxattr(path, &buffer, buffer.count)
        guard length > 0 else { return [] }
        return buffer[..<length].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }

    private static func remove(_ path: String) throws {
        guard Disk.lstat(path) != nil else { return }
        try FileManager.default.removeItem(atPath: path)
    }
}
