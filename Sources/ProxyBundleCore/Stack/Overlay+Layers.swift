#if canImport(Glibc)
import Glibc
#endif

/// Changing the patches while mounted (`.layers`).
extension Overlay {
    /// The layers as `.layers` shows them: one `ROLE PATH` line each, top first, each path
    /// the bytes it was opened at.
    public var layersText: [UInt8] {
        let stack = layers
        return stack.layers.indices.flatMap { Array("\(stack.role($0).rawValue) ".utf8) + stack[$0].path.bytes + [0x0A] }
    }

    /// Replaces the patches with `patches` (highest priority first) as one change, and forgets
    /// everything cached: every later request sees the new stack. Returns what the kernel must
    /// forget (see `invalidate`). EINVAL, changing nothing, when a directory is given twice or
    /// one layer lies inside another. Files open before keep what they opened.
    public func replacePatches(_ patches: [Layer], listingNames: Bool = true) throws(Errno) -> Invalidation {
        try install(try layers.replacingPatches(patches), listingNames: listingNames)
    }
}
