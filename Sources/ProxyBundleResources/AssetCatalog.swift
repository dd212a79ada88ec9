/// What a compiled asset catalog (`Assets.car`) holds: the names of its assets and, for each,
/// the scales and idioms its renditions are for. `UIImage(named:)` looks there before loose
/// files, so `resolve --image` and `check` need to know whether the catalog serves a name.
///
/// An `Assets.car` is a BOM file (a store of numbered blocks, with named variables) whose
/// variables hold the catalog's parts: `KEYFORMAT`, `FACETKEYS`, `RENDITIONS` (B-trees),
/// `APPEARANCEKEYS` (Xcode 11 on), `EXTENDED_METADATA`. Only the keys are read; no image data.
/// The layout is that of the headers of xcbuild's libbom (`bom_format.h`) and libcar
/// (`car_format.h`), which Timac's "Reverse engineering the .car file format" (2018) and "A
/// Deep Dive into Apple's .car File Format" (dbg.re) also describe, checked against catalogs
/// of Xcode 6 to 26. Every offset and length is checked: a file this does not understand is
/// `Unreadable`, never a catalog without the name.
public struct AssetCatalog: Sendable {
    /// Every asset's name (images, colours, data, icons), in byte order.
    public let names: [String]
    /// Whether the catalog was thinned (for the App Store, or for one device): it keeps one
    /// device's scale and idiom, so a rendition it lacks may have been provided all the same.
    public var thinned: Bool { !thinning.isEmpty }
    /// The thinning arguments `EXTENDED_METADATA` records (`carutil 802.000000, thinned <mode
    /// app> <idiom 1> ... <scale 3> ...`, or `optimized <idiom 1> ...`); empty when not thinned.
    public let thinning: String
    /// The appearances `APPEARANCEKEYS` names, by their value in rendition keys
    /// (0 `UIAppearanceAny`, 1 `UIAppearanceDark`...); empty before Xcode 11.
    public let appearances: [Int: String]
    /// The identifier of each name's renditions (attribute 17 of its facet).
    let identifiers: [String: Int]
    /// The renditions of each identifier, in the order of the `RENDITIONS` tree.
    let renditionsByIdentifier: [Int: [Rendition]]

    public init(bytes: [UInt8]) throws(Unreadable) {
        let bom = try BOM(bytes)
        let keyFormat = try KeyFormat(bom.block(named: "KEYFORMAT"))
        let facets = try Self.facets(bom)
        names = facets.map(\.name).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        identifiers = Dictionary(facets.map { ($0.name, $0.identifier) }, uniquingKeysWith: { first, _ in first })
        renditionsByIdentifier = try Self.renditions(bom, keyFormat)
        thinning = try Self.thinning(bom)
        appearances = try Self.appearances(bom)
    }

    /// Every rendition of `name`, in the catalog's order; none when the catalog lacks the name.
    public func renditions(named name: String) -> [Rendition] {
        identifiers[name].flatMap { renditionsByIdentifier[$0] } ?? []
    }

    /// The first rendition that serves `name` on a device of `scale` (1, 2, 3) and `idiom`: one
    /// of that scale or a vector one (scale 0, drawn at every scale), of that idiom or a universal
    /// one (idiom 0); an exact scale is preferred over a vector one, then the idiom's over a
    /// universal one. A device without an idiom (`nil`, a Mac) takes universal ones only. Nil
    /// when none.
    public func rendition(named name: String, scale: Int, idiom: Device.Idiom?) -> Rendition? {
        let idioms = (idiom.map { [Self.value(of: $0)] } ?? []) + [0]
        let candidates = renditions(named: name)
        for wantedScale in [scale, 0] {
            for wantedIdiom in idioms {
                if let found = candidates.first(where: { $0.scale == wantedScale && $0.idiom == wantedIdiom }) {
                    return found
                }
            }
        }
        return nil
    }

    /// The value of `idiom` in rendition keys (libcar's `car_attribute_identifier_idiom_value`).
    static func value(of idiom: Device.Idiom) -> Int {
        switch idiom {
        case .phone: return 1
        case .pad: return 2
        }
    }

    // MARK: the parts

    /// Each `FACETKEYS` entry: the name (the key block, UTF-8) and its identifier. The value
    /// (libcar's `car_facet_value`) is a hot spot (2 × u16), a u16 count, then that many
    /// (u16 attribute, u16 value) pairs, little-endian; attribute 17 is the identifier.
    static func facets(_ bom: BOM) throws(Unreadable) -> [(name: String, identifier: Int)] {
        var facets: [(name: String, identifier: Int)] = []
        var budget = Budget(bom: bom, tree: "FACETKEYS")
        for entry in try bom.tree(named: "FACETKEYS") {
            try budget.spend(entry.key.count + entry.value.count)
            let count = try Int(entry.value.u16LE(at: 4))
            var identifier = 0
            for pair in 0 ..< count {
                let attribute = try entry.value.u16LE(at: 6 + 4 * pair)
                let value = try entry.value.u16LE(at: 8 + 4 * pair)
                if attribute == 17 { identifier = Int(value) }
            }
            facets.append((String(decoding: entry.key.bytes, as: UTF8.self), identifier))
        }
        return facets
    }

    /// Every `RENDITIONS` key with a non-zero identifier, by identifier. A key is one u16 per
    /// attribute of `KEYFORMAT`, in its order, little-endian (Timac; libcar's
    /// `car_rendition_key`). Identifier 0 is a packed atlas, not an asset of its own.
    static func renditions(_ bom: BOM, _ format: KeyFormat) throws(Unreadable) -> [Int: [Rendition]] {
        var renditions: [Int: [Rendition]] = [:]
        for entry in try bom.tree(named: "RENDITIONS") {
            guard entry.key.count >= 2 * format.count else {
                throw Unreadable("a RENDITIONS key of \(entry.key.count) bytes, where KEYFORMAT has \(format.count) attributes")
            }
            let identifier = try format.value(.identifier, in: entry.key)
            guard identifier != 0 else { continue }
            renditions[identifier, default: []].append(try Rendition(key: entry.key, format))
        }
        return renditions
    }

    /// The thinning arguments: the first of four NUL-padded 256-byte strings after `META` in
    /// `EXTENDED_METADATA` (libcar has the 1,024 bytes as one string; in the catalogs we read
    /// they are the thinning arguments, the deployment platform's version, the platform and the
    /// authoring tool). Empty when the catalog has no such part or was not thinned.
    static func thinning(_ bom: BOM) throws(Unreadable) -> String {
        guard bom.variables["EXTENDED_METADATA"] != nil else { return "" }
        let metadata = try bom.block(named: "EXTENDED_METADATA")
        guard metadata.bytes.starts(with: "META".utf8) else { throw Unreadable("EXTENDED_METADATA does not start with META") }
        let text = metadata.bytes.dropFirst(4).prefix(256).prefix { $0 != 0 }
        return String(decoding: text, as: UTF8.self)
    }

    /// `APPEARANCEKEYS`: the appearance's name (the key) and its value, a u16 little-endian.
    static func appearances(_ bom: BOM) throws(Unreadable) -> [Int: String] {
        guard bom.variables["APPEARANCEKEYS"] != nil else { return [:] }
        var appearances: [Int: String] = [:]
        var budget = Budget(bom: bom, tree: "APPEARANCEKEYS")
        for entry in try bom.tree(named: "APPEARANCEKEYS") {
            try budget.spend(entry.key.count + entry.value.count)
            appearances[try Int(entry.value.u16LE(at: 0))] = String(decoding: entry.key.bytes, as: UTF8.self)
        }
        return appearances
    }

    // MARK: renditions

    /// One rendition's key: what device and settings it is for.
    public struct Rendition: Equatable, Sendable, CustomStringConvertible {
        /// 1, 2 or 3; 0 for a vector (PDF or SVG) one, drawn at every scale.
        public var scale: Int
        /// 0 universal, 1 phone, 2 pad, 3 tv, 4 carplay, 5 watch, 6 marketing.
        public var idiom: Int
        /// A value of `AssetCatalog.appearances`; 0 is any appearance.
        public var appearance: Int
        /// The device subtype (a screen height, `2436`), 0 for any.
        public var subtype: Int
        /// The localization's index, 0 for none.
        public var localization: Int
        /// The deployment target it was compiled for, 0 for any.
        public var deploymentTarget: Int

        public init(scale: Int, idiom: Int, appearance: Int = 0, subtype: Int = 0, localization: Int = 0,
                    deploymentTarget: Int = 0) {
            self.scale = scale
            self.idiom = idiom
            self.appearance = appearance
            self.subtype = subtype
            self.localization = localization
            self.deploymentTarget = deploymentTarget
        }

        init(key: Field, _ format: KeyFormat) throws(Unreadable) {
            self.init(scale: try format.value(.scale, in: key), idiom: try format.value(.idiom, in: key),
                      appearance: try format.value(.appearance, in: key), subtype: try format.value(.subtype, in: key),
                      localization: try format.value(.localization, in: key),
                      deploymentTarget: try format.value(.deploymentTarget, in: key))
        }

        static let idiomNames = ["universal", "phone", "pad", "tv", "carplay", "watch", "marketing"]

        /// `scale 2, pad, appearance 0`, with the subtype, localization and deployment target
        /// when they are not 0.
        public var description: String {
            var parts = [scale == 0 ? "vector" : "scale \(scale)"]
            parts.append(Self.idiomNames.indices.contains(idiom) ? Self.idiomNames[idiom] : "idiom \(idiom)")
            parts.append("appearance \(appearance)")
            if subtype != 0 { parts.append("subtype \(subtype)") }
            if localization != 0 { parts.append("localization \(localization)") }
            if deploymentTarget != 0 { parts.append("deployment target \(deploymentTarget)") }
            return parts.joined(separator: ", ")
        }
    }

    /// What of a catalog was not understood.
    public struct Unreadable: Error, CustomStringConvertible {
        public var what: String
        public init(_ what: String) { self.what = what }
        public var description: String { "unreadable asset catalog: \(what)" }
    }
}

extension AssetCatalog {
    /// `KEYFORMAT` (libcar's `car_key_format`): the tag `tmfk` (`kfmt` little-endian), a u32
    /// version, a u32 count, then that many u32 attribute IDs, little-endian: the order of the u16
    /// values in every rendition key. The order differs from file to file; an attribute it lacks
    /// (thinned catalogs have no idiom) is 0 in every key.
    struct KeyFormat {
        /// The attribute IDs read here (libcar's `car_attribute_identifier`, which lacks 7 and 13:
        /// appearance and localization, in every catalog of Xcode 12 on that we read).
        enum Attribute: UInt32 {
            case appearance = 7
            case scale = 12
            case localization = 13
            case idiom = 15
            case subtype = 16
            case identifier = 17
            case deploymentTarget = 25
        }

        /// The number of attributes in each key.
        let count: Int
        /// Where each attribute read here is in a key, in u16s.
        let positions: [Attribute: Int]

        init(_ block: Field) throws(Unreadable) {
            guard block.bytes.starts(with: "tmfk".utf8) else { throw Unreadable("KEYFORMAT does not start with tmfk") }
            count = try Int(block.u32LE(at: 8))
            var positions: [Attribute: Int] = [:]
            for position in 0 ..< count {
                if let attribute = Attribute(rawValue: try block.u32LE(at: 12 + 4 * position)) {
                    positions[attribute] = position
                }
            }
            guard positions[.identifier] != nil else { throw Unreadable("KEYFORMAT has no identifier (17)") }
        self.positions = positions
        }

        /// The attribute's value in a rendition key; 0 when the format lacks it.
        func value(_ attribute: Attribute, in key: Field) throws(Unreadable) -> Int {
            guard let position = positions[attribute] else { return 0 }
            return try Int(key.u16LE(at: 2 * position))
        }
    }

    /// A BOM file (xcbuild's libbom, `bom_format.h`; Timac): the magic `BOMStore`, then big-endian
    /// u32s: version, block count, block table offset and length, variables offset and length.
    /// The block table is a u32 count, then (u32 address, u32 length) per block id; the variables
    /// a u32 count, then per variable a u32 block id, a u8 name length and the name.
    struct BOM {
        let file: Field
        /// Where the first (address, length) pair of the block table is.
        let table: Int
        /// The number of entries in the block table (no tree has more entries than that).
        let blockCount: Int
        let variables: [String: UInt32]

        init(_ bytes: [UInt8]) throws(Unreadable) {
            file = Field(bytes: bytes[...], what: "the file")
            guard bytes.starts(with: "BOMStore".utf8) else { throw Unreadable("no BOMStore magic: not a BOM file") }
            let table = try file.part(at: file.u32BE(at: 16), length: file.u32BE(at: 20), "the block table")
            blockCount = try Int(table.u32BE(at: 0))
            guard blockCount <= (table.count - 4) / 8 else {
                throw Unreadable("the block table lists \(blockCount) blocks in \(table.count) bytes")
            }
            self.table = table.bytes.startIndex + 4
            let list = try file.part(at: file.u32BE(at: 24), length: file.u32BE(at: 28), "the variables")
            var variables: [String: UInt32] = [:]
            var offset = 4
            for _ in 0 ..< (try list.u32BE(at: 0)) {
                let block = try list.u32BE(at: offset)
                let name = try list.part(at: offset + 5, length: Int(list.u8(at: offset + 4)), "a variable's name")
                variables[String(decoding: name.bytes, as: UTF8.self)] = block
                offset += 5 + name.count
            }
            self.variables = variables
        }

        /// Block `id`'s bytes.
        func block(_ id: UInt32, _ what: String) throws(Unreadable) -> Field {
            guard id != 0, Int(id) < blockCount else { throw Unreadable("\(what): block \(id) of \(blockCount)") }
            let entry = table + 8 * Int(id)
            return try file.part(at: file.u32BE(at: entry), length: file.u32BE(at: entry + 4), what)
        }

        /// The block the variable `name` names.
        func block(named name: String) throws(Unreadable) -> Field {
            guard let id = variables[name] else { throw Unreadable("no \(name)") }
            return try block(id, name)
        }

        /// Every (key, value) of the B-tree the variable `name` names, in order. Its block is a
        /// header (`tree`, u32 version, u32 root node, u32 block size, u32 path count...); a node
        /// is u16 isLeaf, u16 count, u32 forward, u32 backward, then `count` (u32 value, u32 key)
        /// block ids, big-endian (libbom's `bom_tree`, `bom_tree_entry`). The walk goes down
        /// through entry 0 to the first leaf (whatever a branch's count: libbom has it one less
        /// than its children), then forward (0 ends) along the leaves. A node seen twice is a
        /// loop, and there are no more entries than blocks: both are Unreadable.
        func tree(named name: String) throws(Unreadable) -> [(key: Field, value: Field)] {
            let header = try block(named: name)
            guard header.bytes.starts(with: "tree".utf8) else { throw Unreadable("\(name) is not a B-tree") }
            var seen = Set<UInt32>()
            var node = try visit(header.u32BE(at: 8), &seen, name)
            while try node.u16BE(at: 0) == 0 {
                node = try visit(node.u32BE(at: 12), &seen, name)
            }
            var entries: [(key: Field, value: Field)] = []
            while true {
                let count = try Int(node.u16BE(at: 2))
                guard entries.count + count <= blockCount else { throw Unreadable("\(name) has more entries than blocks") }
                for index in 0 ..< count {
                    let value = try block(node.u32BE(at: 12 + 8 * index), "a value of \(name)")
                    entries.append((try block(node.u32BE(at: 16 + 8 * index), "a key of \(name)"), value))
                }
                let forward = try node.u32BE(at: 4)
                if forward == 0 { return entries }
                node = try visit(forward, &seen, name)
                guard try node.u16BE(at: 0) != 0 else { throw Unreadable("a leaf of \(name) leads to a branch") }
            }
        }

        /// Node `id` of the tree `name`, unless the walk has been there already.
        private func visit(_ id: UInt32, _ seen: inout Set<UInt32>, _ name: String) throws(Unreadable) -> Field {
            guard seen.insert(id).inserted else { throw Unreadable("\(name) loops: node \(id) twice") }
            return try block(id, "a node of \(name)")
        }
    }

    /// The bytes read out of a tree's keys and values, at most the file's size: blocks that overlap
    /// (in no catalog Xcode writes) could otherwise make a small file take a great deal of memory.
    struct Budget {
        var left: Int
        let tree: String

        init(bom: BOM, tree: String) {
            left = bom.file.count
            self.tree = tree
        }

        mutating func spend(_ count: Int) throws(Unreadable) {
            left -= count
            guard left >= 0 else { throw Unreadable("\(tree)'s blocks overlap: more bytes than the file") }
        }
    }

    /// A part of the file, and what it is (for the error when a read would go past its end).
    struct Field {
        let bytes: ArraySlice<UInt8>
        let what: String

        var count: Int { bytes.count }

        /// The index in `bytes` of `size` bytes at `offset`, all within the part.
        private func start(_ offset: Int, _ size: Int) throws(Unreadable) -> Int {
            guard offset >= 0, size >= 0, size <= count, offset <= count - size else {
                throw Unreadable("\(what): \(size) bytes at \(offset), past its end (\(count) bytes)")
            }
            return bytes.startIndex + offset
        }

        func part(at offset: some BinaryInteger, length: some BinaryInteger, _ what: String) throws(Unreadable) -> Field {
            guard let offset = Int(exactly: offset), let length = Int(exactly: length) else {
                throw Unreadable("\(what): no such offset or length")
            }
            let start = try start(offset, length)
            return Field(bytes: bytes[start ..< start + length], what: what)
        }

        func u8(at offset: Int) throws(Unreadable) -> UInt8 {
            bytes[try start(offset, 1)]
        }

        func u16BE(at offset: Int) throws(Unreadable) -> UInt16 {
            let start = try start(offset, 2)
            return UInt16(bytes[start]) << 8 | UInt16(bytes[start + 1])
        }

        func u16LE(at offset: Int) throws(Unreadable) -> UInt16 {
            let start = try start(offset, 2)
            return UInt16(bytes[start + 1]) << 8 | UInt16(bytes[start])
        }

        func u32BE(at offset: Int) throws(Unreadable) -> UInt32 {
            let start = try start(offset, 4)
            return bytes[start ..< start + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }

        func u32LE(at offset: Int) throws(Unreadable) -> UInt32 {
            let start = try start(offset, 4)
            return bytes[start ..< start + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }
    }
}
