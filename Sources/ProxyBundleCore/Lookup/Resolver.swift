#if canImport(Glibc)
import Glibc
#endif

/// Lookup, as overlayfs's namei: which layer serves a name, seen through whiteouts, opaque
/// directories and the names each layer is known to hold (Resolve.swift), and where a node is
/// now, found again where it went stale (Locate.swift). It keeps no state of its own: what it
/// finds goes to the node table, and the descriptors of directories looked in to the request's
/// view (`DirectoryCache`).
///
/// The folder `Lookup/` owns resolution: this type, the directory descriptors, the control
/// files, file handles and `which`.
final class Resolver: Sendable {
    /// Where what is resolved is remembered, and read back.
    let nodes: NodeTable
    /// The watch that patches' indexes are read with, nil where nothing is cached
    /// (`-o nocache`): see `LayerIndex`.
    let indexWatch: LayerWatch?

    init(nodes: NodeTable, indexWatch: LayerWatch?) {
        self.nodes = nodes
        self.indexWatch = indexWatch
    }
}

/// What a name of a directory resolves to: its placement and reported attributes.
struct Resolved {
    var placement: Placement
    var attributes: stat
    /// Where names fold: how the layer serving the entry spells it (else nil: as asked).
    var spelling: [UInt8]? = nil
}
