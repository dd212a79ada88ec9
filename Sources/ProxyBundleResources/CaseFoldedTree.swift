import ProxyBundleCore

/// A tree whose names are matched ignoring case and normalization (`CaseFold`), as a mount
/// with `-o casefold` matches them, over a tree that matches them exactly (a plain directory):
/// for `resolve --casefold`. Within one directory, names of one key are one entry: the first
/// spelling in byte order serves it; when that is a directory, every directory of the key
/// merges into it (`Data/` and `data/`), and other kinds of entry of the key are unreachable.
///
///     let tree = CaseFoldedTree(try DirectoryTree(path: "/srv/mod"))
///     tree.kind(of: "TEXTURES/rock.DDS")   // .file, for Textures/Rock.dds
public final class CaseFoldedTree: ResourceTree {
    public let base: ResourceTree
    /// The names of each directory of `base` read so far, by real path.
    private var listings: [String: [String]] = [:]

    public init(_ base: ResourceTree) {
        self.base = base
    }

    public var foldsCase: Bool { true }

    public func kind(of path: String) -> ResourceKind? {
        places(path).first.flatMap { base.kind(of: $0) }
    }

    /// The names of the directory at `path`: those of every directory merged there, one
    /// spelling of each key (the first in byte order).
    public func names(in path: String) -> [String] {
        var seen = Set<String>()
        var names: [String] = []
        for place in places(path) where base.kind(of: place) == .directory {
            names += listing(place)
        }
        return names.sorted(by: ResourcePath.byteOrder).filter { seen.insert(CaseFold.key($0)).inserted }
    }

    public func contents(of path: String, limit: Int) -> [UInt8]? {
        places(path).first.flatMap { base.contents(of: $0, limit: limit) }
    }

    public func spelling(of path: String) -> String {
        places(path).first ?? path
    }

    /// The real paths that `path` names, in byte order of their spellings: one, or each
    /// directory merged there; none when nothing matches.
    public func places(_ path: String) -> [String] {
        var places = [""]
        for name in ResourcePath.names(path) {
            if name == ".." { return [] }  // the rules of a tree: paths stay beneath its root
            let key = CaseFold.key(name)
            var found: [String] = []
            for place in places where place.isEmpty || base.kind(of: place) == .directory {
                found += listing(place).filter { CaseFold.key($0) == key }.map { ResourcePath.join(place, $0) }
            }
            // the first spelling serves; directories of the key merge with it
            found.sort { a, b in
                let (x, y) = (ResourcePath.split(a).name, ResourcePath.split(b).name)
                return x == y ? ResourcePath.byteOrder(a, b) : ResourcePath.byteOrder(x, y)
            }
            guard let first = found.first else { return [] }
            if base.kind(of: first) == .directory {
                places = found.filter { base.kind(of: $0) == .directory }
            } else {
                places = [first]
            }
        }
        return places
    }

    private func listing(_ place: String) -> [String] {
        if let known = listings[place] { return known }
        let names = base.names(in: place)
        listings[place] = names
        return names
    }
}
