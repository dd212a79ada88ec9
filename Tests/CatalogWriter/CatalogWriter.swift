/// Writes small compiled asset catalogs (`Assets.car`) for tests: a BOM file with the parts
/// `AssetCatalog` reads, laid out as the public descriptions say (Timac, "Reverse engineering
/// the .car file format"; xcbuild's libbom and libcar headers). Renditions carry keys only, no
/// image data. Each B-tree is one leaf, or several of at most `leafCapacity` entries each under
/// one branch node.
public struct CatalogWriter {
    /// The attribute IDs of every rendition key, in order (`KEYFORMAT`).
    public var keyFormat: [UInt32]
    /// The thinning arguments `EXTENDED_METADATA` records; empty for a catalog not thinned.
    public var thinning: String
    /// The `APPEARANCEKEYS` tree's (name, value) entries; none writes no such tree.
    public var appearances: [(name: String, value: UInt16)]
    /// The most entries a B-tree leaf holds.
    public var leafCapacity: Int
    /// Every facet: its name and the identifier its renditions carry.
    var facets: [(name: String, identifier: UInt16)] = []
    /// Every rendition: its attributes' values; an attribute absent is 0.
    var renditions: [[UInt32: UInt16]] = []

    /// The key order of a catalog Xcode 12 compiled for iOS (with appearance, localization,
    /// scale, idiom, subtype first, and the identifier near the end).
    public static let xcode12KeyFormat: [UInt32] = [7, 13, 12, 15, 16, 26, 27, 9, 8, 25, 24, 4, 20, 21, 23, 22, 17, 1, 2, 10, 6]

    public init(keyFormat: [UInt32] = xcode12KeyFormat, thinning: String = "",
                appearances: [(name: String, value: UInt16)] = [], leafCapacity: Int = 1000) {
        self.keyFormat = keyFormat
        self.thinning = thinning
        self.appearances = appearances
        self.leafCapacity = leafCapacity
    }

    /// The catalog with a rendition of image `name` (element 85, part 181, as Xcode writes
    /// images) for those traits; the name's facet is added with it the first time.
    public func add(name: String, scale: Int, idiom: Int, appearance: Int = 0, subtype: Int = 0,
                    localization: Int = 0, deploymentTarget: Int = 0) -> CatalogWriter {
        let writer = facet(name)
        let identifier = writer.facets.first { $0.name == name }?.identifier ?? 0
        return writer.add(identifier: identifier, attributes: [
            1: 85, 2: 181, 7: UInt16(appearance), 12: UInt16(scale), 13: UInt16(localization), 15: UInt16(idiom),
            16: UInt16(subtype), 25: UInt16(deploymentTarget),
        ])
    }

    /// The catalog with a facet for `name` (if it has none), renditions or not; its identifier
    /// is `identifier`, or one of its own.
    public func facet(_ name: String, identifier: UInt16? = nil) -> CatalogWriter {
        guard !facets.contains(where: { $0.name == name }) else { return self }
        var writer = self
        writer.facets.append((name, identifier ?? UInt16(1000 + facets.count * 7)))
        return writer
    }

    /// The catalog with a rendition key of these attribute values (identifier 0: a packed atlas).
    public func add(identifier: UInt16, attributes: [UInt32: UInt16]) -> CatalogWriter {
        var writer = self
        writer.renditions.append(attributes.merging([17: identifier]) { _, new in new })
        return writer
    }

    public func bytes() -> [UInt8] { build().bytes }

    /// Where things are in `bytes`, for tests that damage them.
    public struct Layout: Sendable {
        /// Each block's (address, length), by block id; block 0 is none.
        public var blocks: [(address: Int, length: Int)]
        /// The block id each variable names.
        public var variables: [String: UInt32]
        /// The block ids of each B-tree's leaves, in order.
        public var leaves: [String: [UInt32]]
        /// Where the block table's count is (its (address, length) pairs follow).
        public var tableAddress: Int
        /// Where the variables list is.
        public var variablesAddress: Int
    }

    /// The file, and where its blocks are.
    public func build() -> (bytes: [UInt8], layout: Layout) {
        var bom = BOMBuilder()
        var variables: [String: UInt32] = [:]
        var leaves: [String: [UInt32]] = [:]
        variables["CARHEADER"] = bom.add(carHeader())
        for (name, entries) in trees() {
            let (header, leafIDs) = bom.addTree(entries, leafCapacity: max(1, leafCapacity))
            variables[name] = header
            leaves[name] = leafIDs
        }
        variables["KEYFORMAT"] = bom.add(Array("tmfk".utf8) + le32(0) + le32(UInt32(keyFormat.count)) + keyFormat.flatMap(le32))
        variables["EXTENDED_METADATA"] = bom.add(metadata())
        let (bytes, blocks, tableAddress) = bom.file(variables: variables.sorted { $0.value < $1.value })
        let variablesAddress = tableAddress + 4 + 8 * blocks.count
        return (bytes, Layout(blocks: blocks, variables: variables, leaves: leaves, tableAddress: tableAddress,
                              variablesAddress: variablesAddress))
    }

    /// The (key, value) entries of each B-tree.
    func trees() -> [(String, [(key: [UInt8], value: [UInt8])])] {
        // in the order added: Xcode's trees are in byte order, and a reader must not count on it
        let facetEntries = facets.map { facet in
            // hot spot (0, 0), then the attributes: element 85, part 181, identifier
            let pairs: [(UInt16, UInt16)] = [(1, 85), (2, 181), (17, facet.identifier)]
            let value = le16(0) + le16(0) + le16(UInt16(pairs.count)) + pairs.flatMap { le16($0.0) + le16($0.1) }
            return (key: Array(facet.name.utf8), value: value)
        }
        let renditionEntries = renditions.map { attributes in
            // a CSI header's tag and nothing else: the reader reads no rendition data
            (key: keyFormat.flatMap { le16(attributes[$0] ?? 0) }, value: Array("ISTC".utf8) + le32(1))
        }
        var trees = [("RENDITIONS", renditionEntries), ("FACETKEYS", facetEntries)]
        if !appearances.isEmpty {
            trees.append(("APPEARANCEKEYS", appearances.map { (key: Array($0.name.utf8), value: le16($0.value)) }))
        }
        return trees
    }

    /// `CARHEADER`: `RATC`, then little-endian versions, rendition count, creator strings.
    func carHeader() -> [UInt8] {
        var header = Array("RATC".utf8) + le32(0x3C9) + le32(17) + le32(0) + le32(UInt32(renditions.count))
        header += fixed("CatalogWriter (proxybundle tests)\n", 128) + fixed("", 256) + [UInt8](repeating: 0, count: 16)
        return header + le32(0) + le32(4) + le32(1) + le32(1)
    }

    /// `EXTENDED_METADATA`: `META`, then four 256-byte strings: thinning arguments, deployment
    /// platform version, deployment platform, authoring tool.
    func metadata() -> [UInt8] {
        Array("META".utf8) + fixed(thinning, 256) + fixed("17.0", 256) + fixed("ios", 256) + fixed("CatalogWriter", 256)
    }
}

/// A BOM file under construction: blocks by id (0 is none), then the block table and the
/// variables, big-endian.
struct BOMBuilder {
    var blocks: [[UInt8]] = [[]]

    mutating func add(_ block: [UInt8]) -> UInt32 {
        blocks.append(block)
        return UInt32(blocks.count - 1)
    }

    /// A B-tree of `entries`: its header's block id and its leaves' block ids. The leaves are
    /// linked forward and backward; more than one go under a branch node whose entries are
    /// (leaf, the leaf's last key), its count one less than its leaves (libbom's `bom_tree_entry`).
    mutating func addTree(_ entries: [(key: [UInt8], value: [UInt8])], leafCapacity: Int) -> (UInt32, [UInt32]) {
        let ids = entries.map { (key: add($0.key), value: add($0.value)) }
        let chunks = stride(from: 0, to: max(ids.count, 1), by: leafCapacity).map { Array(ids[$0 ..< min($0 + leafCapacity, ids.count)]) }
        let first = UInt32(blocks.count)
        let leaves = chunks.indices.map { first + UInt32($0) }
        for (index, chunk) in chunks.enumerated() {
            let forward = index + 1 < leaves.count ? leaves[index + 1] : 0
            let backward = index > 0 ? leaves[index - 1] : 0
            _ = add(node(leaf: true, chunk.map { ($0.value, $0.key) }, forward: forward, backward: backward))
        }
        var root = leaves[0]
        if leaves.count > 1 {
            let pairs = zip(leaves, chunks).map { (value: $0, key: $1.last?.key ?? 0) }
            root = add(node(leaf: false, pairs, count: pairs.count - 1, forward: 0, backward: 0))
        }
        let header = Array("tree".utf8) + be32(1) + be32(root) + be32(4096) + be32(UInt32(entries.count)) + [0]
        return (add(header), leaves)
    }

    /// u16 isLeaf, u16 count (that of the pairs, unless given), u32 forward, u32 backward, then
    /// (u32 value, u32 key) pairs.
    func node(leaf: Bool, _ pairs: [(value: UInt32, key: UInt32)], count: Int? = nil, forward: UInt32,
              backward: UInt32) -> [UInt8] {
        be16(leaf ? 1 : 0) + be16(UInt16(count ?? pairs.count)) + be32(forward) + be32(backward)
            + pairs.flatMap { be32($0.value) + be32($0.key) }
    }

    /// The file (a 512-byte header, the blocks, the block table, the variables), each block's
    /// (address, length), and where the block table is.
    func file(variables: [(key: String, value: UInt32)]) -> ([UInt8], [(address: Int, length: Int)], Int) {
        var bytes = [UInt8](repeating: 0, count: 512)
        var table: [(address: Int, length: Int)] = [(0, 0)]
        for block in blocks.dropFirst() {
            table.append((bytes.count, block.count))
            bytes += block
        }
        let tableAddress = bytes.count
        bytes += be32(UInt32(table.count)) + table.flatMap { be32(UInt32($0.address)) + be32(UInt32($0.length)) }
        let variablesAddress = bytes.count
        bytes += be32(UInt32(variables.count))
        for (name, block) in variables { bytes += be32(block) + [UInt8(name.utf8.count)] + Array(name.utf8) }
        let header = Array("BOMStore".utf8) + be32(1) + be32(UInt32(blocks.count - 1)) + be32(UInt32(tableAddress))
            + be32(UInt32(variablesAddress - tableAddress)) + be32(UInt32(variablesAddress))
            + be32(UInt32(bytes.count - variablesAddress))
        bytes.replaceSubrange(0 ..< header.count, with: header)
        return (bytes, table, tableAddress)
    }
}

func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
func le32(_ value: UInt32) -> [UInt8] { (0 ..< 4).map { UInt8(value >> (8 * $0) & 0xFF) } }
func be16(_ value: UInt16) -> [UInt8] { le16(value).reversed() }
func be32(_ value: UInt32) -> [UInt8] { le32(value).reversed() }

/// `text` in UTF-8, padded with NULs (or cut) to `length` bytes.
func fixed(_ text: String, _ length: Int) -> [UInt8] {
    let bytes = Array(text.utf8.prefix(length))
    return bytes + [UInt8](repeating: 0, count: length - bytes.count)
}
