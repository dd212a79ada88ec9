#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Layer directories merged in-process, exactly as a mount of them shows them: the overlay
/// core resolves every name (whiteouts, opaque directories, a directory merging those below),
/// read-only, without FUSE. For programs that cannot mount, and for `proxybundle check`, which
/// needs to know the layer of each entry.
///
///     let tree = try LayeredTree(paths: ["/srv/hotfix", "/opt/MyApp/Resources"])
///     tree.layer(of: "Images/icon@2x.png")   // 0: the hotfix has it
public final class LayeredTree: ResourceTree {
    /// The layers, the top one first.
    public let layers: [Layer]
    private let overlay: Overlay
    /// The overlay's own layers: `layers`, under an empty one when there is only one (the
    /// overlay wants a substitution apart from its main bundle).
    private let stack: LayerStack

    /// The layers at `paths`, the top one first.
    public convenience init(paths: [String]) throws(ResourceError) {
        var layers: [Layer] = []
        for path in paths {
            do {
                layers.append(try Layer(path: path))
            } catch {
                throw ResourceError(code: error.code, path: path)
            }
        }
        try self.init(layers: layers)
    }

    /// `layers`, the top one first: EINVAL for none, or for one given twice or inside another.
    public init(layers: [Layer]) throws(ResourceError) {
        guard let bottom = layers.last else {
            throw ResourceError(code: EINVAL, path: "")
        }
        self.layers = layers
        do {
            // the same stack as a mount's, without a writable layer: nothing is made anywhere
            stack = try LayerStack(substitution: nil, patches: Array(layers.dropLast()), main: bottom)
            overlay = try Overlay(layers: stack)
        } catch {
            throw ResourceError(code: error.code, path: layers.map(\.path.description).joined(separator: ":"))
        }
    }

    /// The layer (an index of `layers`) whose entry the tree shows at `path`: for a directory,
    /// the top one of those it merges; a symlink is its own entry, not followed.
    public func layer(of path: String) -> Int? {
        guard let entry = walk(path, follow: false), let layer = entry.layer else { return nil }
        return layer
    }

    /// The layers whose entries the tree shows at `path`, top first: one, or each layer of a
    /// merged directory. Symlinks on the way are not followed: none when there is one.
    public func layers(at path: String) -> [Int] {
        guard let serving = try? overlay.serving(Request(overlay), LayerPath(path)), serving.source == .layer || serving.source == .merged else {
            return []
        }
        return serving.places.map(\.layer)
    }

    /// Whether the tree shows an entry at `path`, of any kind (a dangling symlink too).
    public func exists(_ path: String) -> Bool {
        walk(path, follow: false) != nil
    }

    public func kind(of path: String) -> ResourceKind? {
        walk(path, follow: true)?.kind
    }

    public func names(in path: String) -> [String] {
        entries(in: path).map(\.name)
    }

    /// The path of the entry `path` leads to, symlinks followed: a macOS framework's
    /// `Resources` is `Versions/A/Resources`. `path` itself when it leads nowhere or out of the tree.
    public func realPath(_ path: String) -> String {
        walk(path, follow: true)?.names?.joined(separator: "/") ?? path
    }

    /// An entry of a merged directory: its name, the layer that serves it (the top one of a
    /// merged directory), and its kind there (a symlink's own: `.other`).
    public struct Listed: Equatable, Sendable {
        public var name: String
        public var layer: Int
        public var kind: ResourceKind
    }

    /// The entries of the directory at `path`, as the mount lists them, in one listing: the
    /// cheap way to learn the layer of every name of a directory.
    public func entries(in path: String) -> [Listed] {
        guard let entry = walk(path, follow: true), entry.kind == .directory, let names = entry.names else { return [] }
        var node = rootNodeID
        do {
            let request = Request(overlay)
            for name in names { node = try overlay.lookup(request, parent: node, name: Array(name.utf8)).node }
            return try overlay.listDirectory(request, node).named.compactMap { name, item in
                guard name != [0x2E] && name != [0x2E, 0x2E], let text = String(validating: name, as: UTF8.self) else {
                    return nil
                }
                let kind: ResourceKind = item.type == UInt8(DT_REG) ? .file : item.type == UInt8(DT_DIR) ? .directory : .other
                return Listed(name: text, layer: Int(item.layer), kind: kind)
            }
        } catch {
            return []
        }
    }

    public func contents(of path: String, limit: Int) -> [UInt8]? {
        guard let entry = walk(path, follow: true), entry.kind == .file else { return nil }
        let fd: Int32
        if let layer = entry.layer, let names = entry.names {
            guard let opened = try? stack[layer].open(LayerPath(names.joined(separator: "/")), flags: O_RDONLY) else {
                return nil
            }
            fd = opened
        } else {
            fd = open(entry.outside ?? "", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return nil }
        }
        defer { close(fd) }
        return ResourcePath.read(fd, limit: limit)
    }

    /// Where a walk ended: an entry of the tree (its names from the root and its layer), or a
    /// path outside it that an absolute symlink led to.
    private struct Entry {
        var names: [String]?
        var layer: Int?
        var outside: String?
        var kind: ResourceKind
    }

    /// Resolves `path` name by name, as a path walk through a mount would: a symlink on the way
    /// (and the last one with `follow`) is followed, a relative one within the tree, an
    /// absolute one out of it; at most 40 of them.
    private func walk(_ path: String, follow: Bool) -> Entry? {
        // most paths have no symlink: then one resolution of the whole path serves, and tells
        // a missing last name at once
        let all = ResourcePath.names(path)
        if !all.contains("..") {
            switch serve(all) {
            case .entry(let layer, let st) where !follow || st.st_mode & S_IFMT != S_IFLNK:
                return Entry(names: all, layer: layer, outside: nil, kind: ResourcePath.kind(st.st_mode))
            case .absent: return nil
            default: break  // a symlink to follow, or a directory on the way that is not one
            }
        }
        var pending = Array(all.reversed())
        var done: [String] = []
        var current = Entry(names: [], layer: nil, outside: nil, kind: .directory)
        var hops = 0
        while let name = pending.popLast() {
            if name == ".." {
                guard !done.isEmpty else { return nil }
                done.removeLast()
                continue
            }
            let names = done + [name]
            guard case .entry(let layer, let st) = serve(names) else { return nil }
            guard st.st_mode & S_IFMT == S_IFLNK, follow || !pending.isEmpty else {
                done = names
                current = Entry(names: names, layer: layer, outside: nil, kind: ResourcePath.kind(st.st_mode))
                continue
            }
            hops += 1
            guard hops <= 40, let target = try? stack[layer].readLink(LayerPath(names.joined(separator: "/"))),
                  let text = String(validating: target, as: UTF8.self) else { return nil }
            if text.hasPrefix("/") {
                let outside = ([text] + pending.reversed()).joined(separator: "/")
                var st = stat()
                guard stat(outside, &st) == 0 else { return nil }
                return Entry(names: nil, layer: nil, outside: outside, kind: ResourcePath.kind(st.st_mode))
            }
            pending += ResourcePath.names(text).reversed()
        }
        return current
    }

    /// What the overlay says of a path: the layer serving it and its entry there (not
    /// followed); no entry of the last name; or no way to it (a name on the way is missing or
    /// not a directory: perhaps a symlink).
    private enum Served {
        case entry(Int, stat)
        case absent
        case unreachable
    }

    private func serve(_ names: [String]) -> Served {
        let path = LayerPath(names.joined(separator: "/"))
        guard let serving = try? overlay.serving(Request(overlay), path) else { return .unreachable }
        guard serving.source == .layer || serving.source == .merged else { return .absent }
        guard let top = serving.places.first, let st = try? stack[top.layer].attributes(top.path) else { return .absent }
        return .entry(top.layer, st)
    }
}
