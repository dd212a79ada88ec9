#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Layer directories merged in-process by the rules of a mount whose names fold
/// (`FoldedMerge`, issue 38): any spelling finds an entry, directories merge by folded name
/// across and within layers, whiteouts hide every spelling. What `check --casefold` reads the
/// layers below a patch through. Symlinks are entries, not followed.
///
///     let tree = FoldedLayers(layers: [try Layer(path: "/srv/mod"), try Layer(path: "/srv/game")])
///     tree.layer(of: "DATA/Textures/ROCK.dds")   // 0 for the mod's data/textures/Rock.DDS
public final class FoldedLayers: ResourceTree {
    /// The layers, the top one first.
    public let layers: [Layer]
    /// The directories read so far, by the keys of their names from the root.
    private var directories: [String: Directory] = [:]

    /// A merged directory: the real directories of each layer that merge there (their paths,
    /// in the order of `FoldedMerge.Part.directories`), and the rules over their entries.
    private struct Directory {
        var paths: [Int: [String]]
        var merge: FoldedMerge
    }

    /// What a path leads to: the entry's real places, top first (one, or each directory
    /// merged), with the spelling of each name on the way as listed.
    public struct Found {
        public var spelling: String
        public var isDirectory: Bool
        public var places: [(layer: Int, path: String)]
    }

    public init(layers: [Layer]) {
        self.layers = layers
    }

    public var foldsCase: Bool { true }

    public func kind(of path: String) -> ResourceKind? {
        guard let found = find(path), let top = found.places.first else { return nil }
        if found.isDirectory { return .directory }
        guard let st = try? layers[top.layer].attributes(LayerPath(top.path)) else { return nil }
        return st.st_mode & S_IFMT == S_IFREG ? .file : .other
    }

    public func names(in path: String) -> [String] {
        guard let directory = directory(ResourcePath.names(path)) else { return [] }
        return directory.merge.listing.compactMap { String(validating: $0.name, as: UTF8.self) }
    }

    public func contents(of path: String, limit: Int) -> [UInt8]? {
        guard let found = find(path), !found.isDirectory, let top = found.places.first,
              let fd = try? layers[top.layer].open(LayerPath(top.path), flags: O_RDONLY) else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < limit {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, min($0.count, limit - bytes.count)) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    public func spelling(of path: String) -> String {
        find(path)?.spelling ?? path
    }

    /// The layer that serves `path` (for a directory, the top one of those it merges).
    public func layer(of path: String) -> Int? {
        find(path)?.places.first?.layer
    }

    /// The entry at `path`, by any spelling of its names.
    public func find(_ path: String) -> Found? {
        var names = ResourcePath.names(path)
        guard !names.contains("..") else { return nil }
        guard let last = names.popLast() else {
            return Found(spelling: "", isDirectory: true, places: layers.indices.map { ($0, "") })
        }
        guard let parent = directory(names), let served = parent.merge.serving(Array(last.utf8)) else { return nil }
        let spelling = ResourcePath.join(names.isEmpty ? "" : spellings(names), String(decoding: served.name, as: UTF8.self))
        let places = served.places.map { place in
            (place.layer, ResourcePath.join(parent.paths[place.layer]?[place.directory] ?? "",
                                            String(decoding: place.name, as: UTF8.self)))
        }
        return Found(spelling: spelling, isDirectory: served.isDirectory, places: places)
    }

    /// The listed spellings of the directories `names`.
    private func spellings(_ names: [String]) -> String {
        find(names.joined(separator: "/"))?.spelling ?? names.joined(separator: "/")
    }

    /// The merged directory at `names` (any spelling), read once.
    private func directory(_ names: [String]) -> Directory? {
        let key = names.map(CaseFold.key).joined(separator: "/")
        if let known = directories[key] { return known }
        var paths: [Int: [String]] = [:]
        if names.isEmpty {
            for layer in layers.indices { paths[layer] = [""] }
        } else {
            guard let found = find(names.joined(separator: "/")), found.isDirectory else { return nil }
            for place in found.places { paths[place.layer, default: []].append(place.path) }
        }
        var parts: [FoldedMerge.Part] = []
        for layer in layers.indices {
            // a layer without the directory holds nothing of it; later layers still may
            let real = paths[layer] ?? []
            parts.append(FoldedMerge.Part(directories: real.map { entries(layer, $0) },
                                          hidesBelow: !names.isEmpty && real.contains { isOpaque(layer, $0) }))
        }
        let directory = Directory(paths: paths, merge: FoldedMerge(parts))
        directories[key] = directory
        return directory
    }

    private func entries(_ layer: Int, _ path: String) -> [FoldedMerge.Entry] {
        guard let list = try? layers[layer].entries(LayerPath(path)) else { return [] }
        return list.entries.compactMap { entry in
            let name = list.name(entry)
            guard name != [0x2E], name != [0x2E, 0x2E] else { return nil }
            var whiteout = false
            if entry.type == UInt8(DT_CHR) || entry.type == UInt8(DT_UNKNOWN),
               let st = try? layers[layer].attributes(LayerPath(ResourcePath.join(path, String(decoding: name, as: UTF8.self)))) {
                whiteout = Whiteout.isDevice(st)
            }
            return FoldedMerge.Entry(name: name, isDirectory: entry.type == UInt8(DT_DIR), isWhiteout: whiteout)
        }
    }

    /// Whether the directory `path` of `layer` carries an opaque attribute (the marker file is
    /// seen among its entries).
    private func isOpaque(_ layer: Int, _ path: String) -> Bool {
        Whiteout.opaqueAttributes.contains { attribute in
            (try? layers[layer].extendedAttribute(LayerPath(path), name: attribute)) == Array("y".utf8)
        }
    }
}
