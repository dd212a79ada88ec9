/// The rules of one merged directory whose names fold (issue 38, `CaseFold`), over what each
/// layer holds there: the model that `check --casefold` walks and the mount is compared with.
///
/// - Names of one key are one entry. In a layer, the first spelling in byte order serves it;
///   when that is a directory, the layer's other directories of the key merge into it (their
///   entries, a name in two of them taken from the first), and its other entries of the key
///   never show.
/// - The highest layer holding any spelling of a key serves it, with its spelling; a directory
///   merges the directories of the key below until a layer has another kind of entry there,
///   or hides the key (a 0/0 device of any spelling that comes first, or a `.wh.` file of any
///   spelling in the layer or above, down to the entry), or until the directory is opaque
///   there (the caller then gives no layer below: see `Part.hidesBelow`).
///
///     let merged = FoldedMerge([part(["Data/", "a.txt"]), part(["data/", ".wh.A.TXT"])])
///     merged.serving(Array("DATA".utf8))?.places.count   // 2: Data of layer 0, data of layer 1
public struct FoldedMerge: Sendable {
    /// An entry of one real directory of a layer.
    public struct Entry: Equatable, Sendable {
        public var name: [UInt8]
        public var isDirectory: Bool
        /// A 0/0 character device: a whiteout of its own name.
        public var isWhiteout: Bool

        public init(name: [UInt8], isDirectory: Bool, isWhiteout: Bool = false) {
            self.name = name
            self.isDirectory = isDirectory
            self.isWhiteout = isWhiteout
        }
    }

    /// One layer's part of the directory: the entries of each of its real directories merged
    /// here, in byte order of their spellings, and whether one of them hides the layers below
    /// (an opaque marker or attribute).
    public struct Part: Sendable {
        public var directories: [[Entry]]
        public var hidesBelow: Bool

        public init(directories: [[Entry]], hidesBelow: Bool = false) {
            self.directories = directories
            self.hidesBelow = hidesBelow || directories.contains { $0.contains { $0.name == Whiteout.opaqueMarker } }
        }
    }

    /// A real entry: its layer (an index of the parts), the real directory of that layer it
    /// is in (an index of the part's `directories`), and its name there.
    public struct Place: Equatable, Sendable {
        public var layer: Int
        public var directory: Int
        public var name: [UInt8]
    }

    /// What a key resolves to: the spelling listed, and the real entries that serve it (one,
    /// or each directory merged), top first.
    public struct Served: Equatable, Sendable {
        public var name: [UInt8]
        public var isDirectory: Bool
        public var places: [Place]
        public var layer: Int { places[0].layer }
    }

    /// Per layer: the key's entries (byte order of name, then of directory), and the keys
    /// a `.wh.` file hides.
    private var spellings: [[[UInt8]: [(place: Place, entry: Entry)]]] = []
    private var whiteouts: [Set<[UInt8]>] = []

    /// `parts`, the top layer's first; those below one that hides them are left out.
    public init(_ parts: [Part]) {
        for part in parts {
            var byKey: [[UInt8]: [(place: Place, entry: Entry)]] = [:]
            var hidden = Set<[UInt8]>()
            for (directory, entries) in part.directories.enumerated() {
                for entry in entries {
                    if Whiteout.hasPrefix(entry.name) {
                        if let name = Whiteout.hiddenName(entry.name) { hidden.insert(CaseFold.key(name)) }
                        continue
                    }
                    let place = Place(layer: spellings.count, directory: directory, name: entry.name)
                    byKey[CaseFold.key(entry.name), default: []].append((place, entry))
                }
            }
            for key in byKey.keys {
                byKey[key]?.sort { a, b in
                    a.entry.name == b.entry.name ? a.place.directory < b.place.directory
                        : a.entry.name.lexicographicallyPrecedes(b.entry.name)
                }
            }
            spellings.append(byKey)
            whiteouts.append(hidden)
            if part.hidesBelow { break }
        }
    }

    /// What `name` (any spelling) resolves to; nil when nothing shows of it.
    public func serving(_ name: some Collection<UInt8>) -> Served? {
        servingKey(CaseFold.key(name))
    }

    private func servingKey(_ key: [UInt8]) -> Served? {
        var found: Served? = nil
        for layer in spellings.indices {
            if let all = spellings[layer][key], let first = all.first {
                if first.entry.isWhiteout { break }
                let directories = all.filter { $0.entry.isDirectory }.map(\.place)
                if var merged = found {
                    guard first.entry.isDirectory else { break }
                    merged.places += directories
                    found = merged
                } else if first.entry.isDirectory {
                    found = Served(name: first.entry.name, isDirectory: true, places: directories)
                } else {
                    return Served(name: first.entry.name, isDirectory: false, places: [first.place])
                }
            }
            if whiteouts[layer].contains(key) { break }
        }
        return found
    }

    /// Everything the directory shows, in byte order of the spellings listed.
    public var listing: [Served] {
        var keys = Set<[UInt8]>()
        for layer in spellings { keys.formUnion(layer.keys) }
        return keys.compactMap(servingKey).sorted { $0.name.lexicographicallyPrecedes($1.name) }
    }
}
