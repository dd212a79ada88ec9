#if canImport(Glibc)
import Glibc
#endif

/// The control files at the root of the mount. They are in no layer and hide any entry of
/// the same name there; they cannot be removed, renamed or linked.
/// - `.invalidate`: writing to it (or truncating it) flushes every cache, the daemon's and
///   the kernel's; writing a relative path limits the flush to that subtree.
/// - `.stats`: read-only; the cache's figures as `key: value` lines.
/// - `.layers`: the layers, one `ROLE PATH` line each, top first; writing a list of patch
///   directories replaces the patches.
/// - `.remount`: what a remount may change, as `-o` options (`ro` or `rw`, the cache
///   timeouts); writing some of them changes them.
public enum ControlFile: CaseIterable, Sendable {
    case invalidate
    case stats
    case layers
    case remount

    public var name: [UInt8] {
        switch self {
        case .invalidate: ControlFile.invalidateName
        case .stats: ControlFile.statsName
        case .layers: ControlFile.layersName
        case .remount: ControlFile.remountName
        }
    }

    // built once: names are compared on every lookup in the root
    private static let invalidateName = Array(".invalidate".utf8)
    private static let statsName = Array(".stats".utf8)
    private static let layersName = Array(".layers".utf8)
    private static let remountName = Array(".remount".utf8)

    /// The node ID the kernel knows it by (reserved: below `NodeTable.firstNodeID`).
    public var node: NodeID {
        switch self {
        case .invalidate: 2
        case .stats: 3
        case .layers: 4
        case .remount: 5
        }
    }

    /// The inode number it reports, far above those of ordinary file systems.
    var inode: ino_t { 0x7FFF_FFFF_FFFF_FF00 | ino_t(node) }

    var mode: mode_t {
        switch self {
        case .invalidate, .layers, .remount: S_IFREG | 0o644
        case .stats: S_IFREG | 0o444
        }
    }

    /// Checked by most requests, so without allocating.
    public init?(node: NodeID) {
        switch node {
        case ControlFile.invalidate.node: self = .invalidate
        case ControlFile.stats.node: self = .stats
        case ControlFile.layers.node: self = .layers
        case ControlFile.remount.node: self = .remount
        default: return nil
        }
    }

    /// The control file `name` names in directory `parent`, if any.
    public init?(name: [UInt8], in parent: NodeID) {
        guard parent == rootNodeID else { return nil }
        if name == ControlFile.invalidateName {
            self = .invalidate
        } else if name == ControlFile.statsName {
            self = .stats
        } else if name == ControlFile.layersName {
            self = .layers
        } else if name == ControlFile.remountName {
            self = .remount
        } else {
            return nil
        }
    }

    /// Its attributes: an empty file owned by the user who mounted, with the given times.
    func attributes(changed time: timespec) -> stat {
        var st = stat()
        st.st_ino = inode
        st.st_mode = mode
        st.st_nlink = 1
        st.st_uid = geteuid()
        st.st_gid = getegid()
        st.st_blksize = 4096
        st.st_atim = time
        st.st_mtim = time
        st.st_ctim = time
        return st
    }
}
