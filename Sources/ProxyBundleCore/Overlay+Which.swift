#if canImport(Glibc)
import Glibc
#endif

/// Which layer serves a path of the merged view (for `proxybundle which`).
public struct Serving: Equatable, Sendable {
    public enum Source: Equatable, Sendable {
        /// The substitution's entry (a file, or a directory that hides the main bundle's).
        case substitution
        /// The main bundle's entry.
        case main
        /// A directory present in both layers, merged.
        case merged
        /// Hidden by a whiteout (`path` is the whiteout, in the substitution).
        case whiteout
        /// Hidden because the substitution's directory `path` is opaque.
        case opaqueDirectory
        /// One of the mount's control files (`.invalidate`, `.stats`).
        case control
        /// In neither layer.
        case missing
    }

    public var source: Source
    /// The backing path, relative to the layer's root (for `merged`: in both layers).
    public var path: LayerPath
}

extension Overlay {
    /// Resolves `path` (relative to the mount's root) name by name as a lookup through the
    /// mount would, and tells which layer serves it, or why nothing does.
    /// ENOENT/ENOTDIR when a directory on the way is missing or is not a directory.
    public func serving(_ path: LayerPath) throws(Errno) -> Serving {
        let names = path.bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
        var node = rootNodeID
        for (index, name) in names.enumerated() {
            if name == [UInt8(ascii: ".")] { continue }
            if name == [UInt8(ascii: "."), UInt8(ascii: ".")] { throw Errno.invalid }
            switch try find(name, in: node) {
            case .found(let entry):
                if ControlFile(node: entry.node) != nil {
                    guard index == names.count - 1 else { throw Errno.notDirectory }
                    return Serving(source: .control, path: LayerPath(bytes: name))
                }
                node = entry.node
            case .absent:
                guard index == names.count - 1 else { throw Errno.noEntry }
                return try whyAbsent(name, in: node)
            }
        }
        let location = try locate(node)
        let placement = location.placement
        let source: Serving.Source = placement.inUpper ? (placement.inLower ? .merged : .substitution) : .main
        return Serving(source: source, path: location.path)
    }

    /// Why `name` is not found in directory `parent`: a whiteout, an opaque directory, or not there.
    private func whyAbsent(_ name: [UInt8], in parent: NodeID) throws(Errno) -> Serving {
        let dir = try locate(parent)
        let path = dir.path.appending(name)
        guard dir.placement.inUpper else { return Serving(source: .missing, path: path) }
        let whiteoutFile = dir.path.appending(Whiteout.fileName(hiding: name))
        if (try? upper.attributes(whiteoutFile)) != nil { return Serving(source: .whiteout, path: whiteoutFile) }
        if let st = try? upper.attributes(path), Whiteout.isDevice(st) { return Serving(source: .whiteout, path: path) }
        if !dir.placement.inLower, (try? lower.attributes(path)) != nil {
            return Serving(source: .opaqueDirectory, path: dir.path)
        }
        return Serving(source: .missing, path: path)
    }
}
