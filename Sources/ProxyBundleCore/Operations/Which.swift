#if canImport(Glibc)
import Glibc
#endif

/// Which layer serves a path of the merged view (for `proxybundle which`).
public struct Serving: Equatable, Sendable {
    public enum Source: Equatable, Sendable {
        /// One layer's entry (`places` has that layer).
        case layer
        /// A directory merged from several layers (`places` has each of them, top first).
        case merged
        /// Hidden by a whiteout (`places` has the whiteout: a `.wh.` file or a 0/0 device).
        case whiteout
        /// Hidden because a directory on the way is opaque (`places` has that directory).
        case opaqueDirectory
        /// One of the mount's control files (`.invalidate`, `.stats`, `.layers`).
        case control
        /// In no layer.
        case missing
    }

    /// A path in a layer (relative to its root).
    public struct Place: Equatable, Sendable {
        public var layer: Int
        public var path: LayerPath
        /// Whether `path` is the layer's own spelling already (one of several real directories
        /// a folding mount merges in the layer), rather than the view's.
        public var isSpelled = false
    }

    public var source: Source
    public var places: [Place]
}

extension Overlay {
    /// Where node `node` is in the merged view, for a log line: `/dir/name` (`node N` when it
    /// is no longer known).
    public func displayPath(_ request: Request, of node: NodeID) -> String {
        if let control = ControlFile(node: node) { return "/" + String(decoding: control.name, as: UTF8.self) }
        guard let location = try? resolver.locate(request, node) else { return "node \(node)" }
        return "/" + String(decoding: location.path.bytes, as: UTF8.self)
    }

    /// Resolves `path` (relative to the mount's root) name by name as a lookup through the
    /// mount would, and tells which layer serves it, or why nothing does.
    /// ENOENT/ENOTDIR when a directory on the way is missing or is not a directory.
    public func serving(_ request: Request, _ path: LayerPath) throws(Errno) -> Serving {
        let names = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        var node = rootNodeID
        for (index, name) in names.enumerated() {
            if name == [UInt8(ascii: ".")] { continue }
            if name == [UInt8(ascii: "."), UInt8(ascii: ".")] { throw Errno.invalid }
            switch try find(request, name, in: node) {
            case .found(let entry):
                if ControlFile(node: entry.node) != nil {
                    guard index == names.count - 1 else { throw Errno.notDirectory }
                    return Serving(source: .control, places: [])
                }
                node = entry.node
            case .absent:
                guard index == names.count - 1 else { throw Errno.noEntry }
                return try whyAbsent(request, name, in: node)
            }
        }
        let location = try resolver.locate(request, node)
        guard location.placement.isDirectory else {
            return Serving(source: .layer, places: [Serving.Place(layer: Int(location.placement.top), path: location.path)])
        }
        let dirs = try resolver.openDirectory(request, location.path, location.placement)
        var places: [Serving.Place] = []
        for index in dirs.present {
            // where names fold, each real directory the layer merges (`DATA/` beside `data/`)
            let reals = request.layers.foldsNames ? ((try? request.layers[index].spelledPaths(location.path).found) ?? []) : []
            if reals.count > 1 {
                places += reals.map { Serving.Place(layer: index, path: $0, isSpelled: true) }
            } else {
                places.append(Serving.Place(layer: index, path: location.path))
            }
        }
        return Serving(source: places.count > 1 ? .merged : .layer, places: places)
    }

    /// Why `name` is not found in directory `parent`: a whiteout in a layer it merges, a layer
    /// below that it does not merge because it is opaque there, or in no layer at all.
    private func whyAbsent(_ request: Request, _ name: [UInt8], in parent: NodeID) throws(Errno) -> Serving {
        let dir = try resolver.locate(request, parent)
        let path = dir.path.appending(name)
        let stack = request.layers
        for index in stack.indices(of: dir.placement) {
            let layer = stack[index]
            let whiteoutFile = dir.path.appending(Whiteout.fileName(hiding: name))
            if (try? layer.attributes(whiteoutFile)) != nil {
                return Serving(source: .whiteout, places: [Serving.Place(layer: index, path: whiteoutFile)])
            }
            if let st = try? layer.attributes(path), Whiteout.isDevice(st) {
                return Serving(source: .whiteout, places: [Serving.Place(layer: index, path: path)])
            }
        }
        let bottom = Int(dir.placement.bottom)
        if bottom + 1 < stack.count, stack.layers[(bottom + 1)...].contains(where: { (try? $0.attributes(path)) != nil }),
           (try? stack[bottom].withDirectory(dir.path) { (fd: Int32) throws(Errno) in try Whiteout.isOpaque(fd) }) == true {
            return Serving(source: .opaqueDirectory, places: [Serving.Place(layer: bottom, path: dir.path)])
        }
        return Serving(source: .missing, places: [])
    }
}
