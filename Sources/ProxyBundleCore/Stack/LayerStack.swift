#if canImport(Glibc)
import Glibc
#endif

/// The layers of a mount, top first: the substitution (index 0, the only layer ever written)
/// when the stack has one, then the patches in the order given (the first wins), then the main
/// bundle (last). A name
/// in a higher layer shadows the same name in every layer below it; a directory merges with
/// the same directory in the layers below, down to the first layer where it is opaque.
///
/// The folder `Stack/` owns the stack and its layers: each layer's descriptor and identity,
/// the check of a layer list, the substitution's work area and kept inode numbers, and the
/// OCI whiteout conventions every layer is read with.
public final class LayerStack: Sendable {
    /// What a layer is to the mount.
    public enum Role: String, Sendable {
        case substitution, patch, main
    }

    public let layers: [Layer]
    /// The writable top, if the stack has one (its layer is `layers[0]`).
    public let substitution: Substitution?
    /// The layers with an index (see `LayerIndex`), top first: the patches, unless names fold.
    let indexed: [UInt16]
    /// The others, top first: the substitution, the main bundle, patches where names fold.
    let unindexed: [UInt16]
    /// Whether any patch has an index.
    var hasIndexedPatches: Bool { !indexed.isEmpty }

    /// The most layers a mount can have: `LayerList.patchLimit` patches, the substitution and
    /// the main bundle (a layer is numbered by two bytes in nodes and listings).
    public static let limit = LayerList.patchLimit + 2

    /// E2BIG past `limit` layers; EINVAL when a directory is given twice, or one layer lies
    /// inside another (a change in one would change the other behind the daemon's back).
    public convenience init(substitution: Substitution?, patches: [Layer] = [], main: Layer) throws(Errno) {
        try self.init(substitution: substitution, patches: patches, main: main, checked: [])
    }

    /// `checked`: layers already known to lie apart (those of a stack): a list of them, each
    /// once, needs no check of its paths.
    private init(substitution: Substitution?, patches: [Layer], main: Layer, checked: Set<ObjectIdentifier>) throws(Errno) {
        guard patches.count <= LayerList.patchLimit else { throw Errno(E2BIG) }
        self.substitution = substitution
        let layers = (substitution.map { [$0.layer] } ?? []) + patches + [main]
        self.layers = layers
        indexed = layers.indices.filter { layers[$0].index != nil }.map(UInt16.init)
        unindexed = layers.indices.filter { layers[$0].index == nil }.map(UInt16.init)
        let distinct = Set(layers.map(ObjectIdentifier.init))
        if distinct.count != layers.count || !distinct.isSubset(of: checked) { try LayerStack.checkApart(layers) }
    }

    /// The same directory is one file system's inode, whatever path it was reached by; a
    /// layer inside another is told by their canonical paths.
    private static func checkApart(_ layers: [Layer]) throws(Errno) {
        struct Directory: Hashable { var device: UInt64, inode: UInt64 }
        var seen = Set<Directory>()
        for layer in layers where !seen.insert(Directory(device: layer.device, inode: layer.inode)).inserted {
            throw Errno.invalid
        }
        let paths = layers.compactMap(\.canonicalPath)
        if paths.count == layers.count, LayerList.problem(paths) != nil { throw Errno.invalid }
    }

    /// Raises this process's open-file limit to its hard limit: a mount holds a descriptor
    /// per layer, and thousands of layers pass the usual soft limit (1,024) by far.
    public static func raiseOpenFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    public var count: Int { layers.count }
    public subscript(index: Int) -> Layer { layers[index] }
    public var main: Layer { layers[layers.count - 1] }
    public var patches: ArraySlice<Layer> { layers[(substitution == nil ? 0 : 1) ..< layers.count - 1] }
    public var mainIndex: Int { layers.count - 1 }
    /// Whether names are matched ignoring case (`-o casefold`): the layers then spell them.
    public var foldsNames: Bool { main.spellings != nil }

    /// Forgets how every layer spells its names: they may have changed on disk.
    func forgetSpellings() {
        for layer in layers { layer.spellings?.forget() }
    }

    /// The layers of this stack an entry placed so may be in, top first (none of a placement
    /// that outlived a swap to fewer layers).
    public func indices(of placement: Placement) -> Range<Int> {
        placement.layers.clamped(to: layers.indices)
    }

    public func role(_ index: Int) -> Role {
        index == 0 && substitution != nil ? .substitution : index == layers.count - 1 ? .main : .patch
    }

    /// The same layers with other patches.
    /// A list of this stack's own patches (another order, or some of them) is not checked
    /// again: a swap between orders of 1,000 patches sorts no paths.
    func replacingPatches(_ patches: [Layer]) throws(Errno) -> LayerStack {
        try LayerStack(substitution: substitution, patches: patches, main: main, checked: Set(layers.map(ObjectIdentifier.init)))
    }

    /// The same layers with another substitution.
    func replacingSubstitution(_ substitution: Substitution) throws(Errno) -> LayerStack {
        try LayerStack(substitution: substitution, patches: Array(patches), main: main)
    }

    /// Where the root merges: from the substitution down to the first layer whose root is
    /// opaque, or to the main bundle. With `watch`, a patch's index tells (see `LayerIndex`).
    func rootPlacement(index watch: LayerWatch? = nil) throws(Errno) -> Placement {
        for index in layers.indices {
            let layer = layers[index]
            let opaque: Bool
            if let watch, !foldsNames, let layerIndex = layer.index {
                opaque = try layerIndex.directory(.root, of: layer, watch: watch)?.isOpaque ?? false
            } else {
                opaque = try Whiteout.isOpaque(layer.rootFD)
            }
            if opaque { return Placement(top: 0, bottom: index, isDirectory: true) }
        }
        return Placement(top: 0, bottom: mainIndex, isDirectory: true)
    }
}

/// Which layers hold a node's entry: `top` is the highest layer that has it, which serves its
/// attributes (and a file's data); a directory merges the same directory of every layer from
/// `top` down to `bottom` that has it (a layer between them may lack it, none has another
/// kind of entry or a whiteout there). A non-directory lives in one layer: `bottom == top`.
public struct Placement: Equatable, Sendable {
    /// `top` and `bottom` in 15 bits each, little-endian, and `isDirectory` in the last bit:
    /// four bytes without alignment, so that a node stays 64 bytes with room for 32,767 layers.
    private var packed: (UInt8, UInt8, UInt8, UInt8)

    public init(top: Int, bottom: Int, isDirectory: Bool) {
        packed = (0, 0, 0, 0)
        self.top = UInt16(truncatingIfNeeded: top)
        self.bottom = UInt16(truncatingIfNeeded: bottom)
        self.isDirectory = isDirectory
    }

    public var top: UInt16 {
        get { UInt16(packed.0) | UInt16(packed.1 & 0x7F) << 8 }
        set {
            packed.0 = UInt8(truncatingIfNeeded: newValue)
            packed.1 = packed.1 & 0x80 | UInt8(truncatingIfNeeded: newValue >> 8) & 0x7F
        }
    }

    public var bottom: UInt16 {
        get { UInt16(packed.2) | UInt16(packed.3 & 0x7F) << 8 }
        set {
            packed.2 = UInt8(truncatingIfNeeded: newValue)
            packed.3 = packed.3 & 0x80 | UInt8(truncatingIfNeeded: newValue >> 8) & 0x7F
        }
    }

    public var isDirectory: Bool {
        get { packed.3 & 0x80 != 0 }
        set { packed.3 = newValue ? packed.3 | 0x80 : packed.3 & 0x7F }
    }

    public static func == (a: Placement, b: Placement) -> Bool {
        a.packed == b.packed
    }

    /// A non-directory in `layer`.
    public static func file(in layer: Int) -> Placement {
        Placement(top: layer, bottom: layer, isDirectory: false)
    }

    /// The layers the entry may be in, top first.
    public var layers: Range<Int> { Int(top) ..< Int(bottom) + 1 }

    /// Whether the substitution has the entry (then changes need no copy-up). In a stack
    /// without one, layer 0 is the top patch: nothing is written there, as every change
    /// answers EROFS before it looks at placements.
    public var inSubstitution: Bool { top == 0 }

    /// Whether a layer below the substitution serves the entry or merges into it.
    public var reachesBelowSubstitution: Bool { bottom > 0 }
}

/// Inode numbers as the mount reports them: unique within the mount, stable while mounted,
/// shared by hard links within a layer. Layers on one file system have distinct numbers
/// already and report them as they are (as overlayfs does); the numbers of another file system
/// carry a tag in their top bits, one per file system: none for the main bundle's, the highest
/// bit for the next one seen (so a substitution on a file system of its own is tagged with
/// bit 63), then bit 62, bits 63 and 62, and so on (the tag's bits reversed, from bit 63 down).
/// File systems are numbered in the order first seen and keep their tag for the life of the
/// daemon, also when the patches change.
struct InodeNumbers: Sendable {
    /// The devices seen, in order; the main bundle's first.
    private(set) var devices: [UInt64]

    init(main: UInt64) { devices = [main] }

    /// Gives each layer's file system a tag, keeping those already given.
    mutating func register(_ stack: LayerStack) {
        for layer in stack.layers where !devices.contains(layer.device) && devices.count < 256 {
            devices.append(layer.device)
        }
    }

    /// The tag of the file system `device` (0 for the main bundle's and any not registered).
    func tag(_ device: UInt64) -> UInt64 {
        if devices.count == 1 || device == devices[0] { return 0 }
        guard let index = devices.firstIndex(of: device) else { return 0 }
        return UInt64(UInt8(index).bitReversed) << 56
    }

    func number(_ ino: ino_t, device: UInt64) -> ino_t {
        ino | ino_t(tag(device))
    }
}

extension UInt8 {
    /// The bits in reverse order (bit 0 becomes bit 7).
    var bitReversed: UInt8 {
        var value = self
        var result: UInt8 = 0
        for _ in 0..<8 {
            result = result << 1 | value & 1
            value >>= 1
        }
        return result
    }
}
