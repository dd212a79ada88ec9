/// Spellings of one name, where names fold (`-o casefold`). The kernel compares names byte for
/// byte, so it looks up `Data` and `DATA` separately. Each spelling of a directory is a node of
/// its own (a directory inode has one dentry: see docs/DESIGN.md), and one of them, the first
/// the kernel looked up, stands for all (`canonical`). Every spelling of a non-directory, through
/// any spelling of its directories, is one node with one more name each, as hard links are:
/// one kernel inode, so one page cache and one set of attributes.
extension NodeTable {
    /// What the spellings of one name share: its directory's standing node and its key (the
    /// key of `name`).
    struct SpelledKey {
        let parent: NodeID
        let name: [UInt8]
    }

    static func foldedKey(parent: NodeID, name: [UInt8], in s: State) -> SpelledKey {
        SpelledKey(parent: s.canonical[parent] ?? parent, name: name)
    }

    /// Whether `node` is named with the key of `name`.
    private static func spells(_ node: Node, _ name: [UInt8]) -> Bool {
        node.name.withBytes { mine in
            name.withUnsafeBytes { theirs in
                if FoldedKey.isASCII(mine) && FoldedKey.isASCII(theirs) {
                    return FoldedKey.equal(stored: mine, lowered: true, key: theirs, lowered: true)
                }
                return CaseFold.key(Array(mine)) == CaseFold.key(name)
            }
        }
    }

    /// The node that stands for the spellings `folded` of an entry of kind `kind`, if the
    /// table has it: of the nodes named with that key in the directory's standing node or in
    /// another spelling of it, the newest. The index hashes names by key (see `ChildIndex`),
    /// so they are in one probe chain for each spelling of the directory, and a name renamed
    /// or removed leaves it with its node. Nil where the newest is of another kind: a new node
    /// then takes its place, as the newest.
    static func spelled(_ folded: SpelledKey, kind: UInt8, isDirectory: Bool, in s: State) -> NodeID? {
        var newest: NodeID = 0
        forEachSpelling(of: folded.parent, in: s) { directory in
            s.named.forEach(hash: s.named.hash(directory, folded.name)) { id in
                guard id > newest, let node = s.nodes[id], node.parent == directory, spells(node, folded.name) else { return }
                newest = id
            }
        }
        guard let node = s.nodes[newest], node.kind == kind, node.placement.isDirectory == isDirectory else { return nil }
        return newest
    }

    /// Calls `body` with directory node `standing` and each other spelling of it.
    private static func forEachSpelling(of standing: NodeID, in s: State, _ body: (NodeID) -> Void) {
        body(standing)
        guard !s.spellings.isEmpty else { return }
        for node in s.spellings[standing] ?? [] { body(node) }
    }

    /// A new directory node `id`, another spelling of the directory `standing` stands for:
    /// it records which node that is (a node without one stands for itself, being the newest).
    static func recordSpelling(_ id: NodeID, standing: NodeID?, in s: inout State) {
        guard let standing else { return }
        let stands = s.canonical[standing] ?? standing
        s.canonical[id] = stands
        s.spellings[stands, default: []].append(id)
    }

    /// Node `id` leaves the table. A node that stood for others stays their group's name,
    /// gone or not: they keep its ID in `canonical`, and it keeps them in `spellings`.
    static func forgetSpelling(_ id: NodeID, in s: inout State) {
        guard !s.canonical.isEmpty, let stands = s.canonical.removeValue(forKey: id) else { return }
        s.spellings[stands]?.removeAll { $0 == id }
        if s.spellings[stands]?.isEmpty == true { s.spellings[stands] = nil }
    }

    /// The other spellings of directory node `id` that the kernel holds: their cached
    /// attributes and listings are outdated by a change made through `id`.
    func otherSpellings(of id: NodeID) -> [NodeID] {
        guard foldsNames else { return [] }
        return locked { s in
            let standing = s.canonical[id] ?? id
            var others = (s.spellings[standing] ?? []).filter { $0 != id }
            if standing != id && s.nodes[standing] != nil { others.append(standing) }
            return others
        }
    }

    /// Takes out every other name, in `parent` or another spelling of it, that folds as `name`
    /// does (an entry's other spellings: a file's other names, a directory's other nodes),
    /// but `keeping`, and returns them: `name` was just removed or renamed, and they would
    /// still lead to what it led to.
    func takeOtherSpellings(of name: [UInt8], in parent: NodeID, keeping kept: (parent: NodeID, name: [UInt8])?) -> [ChildKey] {
        guard foldsNames else { return [] }
        let parents = Set([parent] + otherSpellings(of: parent))
        let key = CaseFold.key(name)
        return locked { s in
            let others = s.childKeys(in: { parents.contains($0) }).filter { other in
                !(other.parent == parent && other.name == name) && !(other.parent == kept?.parent && other.name == kept?.name)
                    && CaseFold.key(other.name) == key
            }
            for other in others { NodeTable.unlink(other, from: &s) }
            if !others.isEmpty { s.version &+= 1 }
            return others
        }
    }

    /// Takes out the names remembered as missing from `parent`, and from its other spellings,
    /// that fold as `name` does, and returns them: made now, they exist (the kernel may
    /// remember them missing too).
    func takeAbsentSpellings(of name: [UInt8], in parent: NodeID) -> [ChildKey] {
        guard foldsNames else { return [] }
        let parents = [parent] + otherSpellings(of: parent)
        let key = CaseFold.key(name)
        return locked { s in
            var taken: [ChildKey] = []
            for directory in parents {
                for missing in s.absent.names(in: directory) ?? [] where CaseFold.key(missing) == key {
                    taken.append(ChildKey(parent: directory, name: missing))
                }
            }
            for missing in taken { s.absent.remove(missing) }
            return taken
        }
    }

    /// Every spelling the daemon (and so perhaps the kernel) knows of `name` in directory
    /// `directory` and in its other spellings (its other nodes): names of nodes and names
    /// remembered missing whose key is `name`'s. An invalidation of one spelling, as inotify
    /// or `.invalidate` names it, is an invalidation of all of them (issue 45: a name looked
    /// up in vain as `UNI2/new.txt` stayed missing after `uni2/NEW.TXT` came and was invalidated).
    static func spellings(of name: [UInt8], in directory: NodeID, in s: State) -> [ChildKey] {
        let standing = s.canonical[directory] ?? directory
        var directories: Set<NodeID> = [directory, standing]
        directories.formUnion(s.spellings[standing] ?? [])
        let key = CaseFold.key(name)
        var found = s.childKeys(in: directories.contains).filter { CaseFold.key($0.name) == key }
        for parent in directories {
            for missing in s.absent.names(in: parent) ?? [] where CaseFold.key(missing) == key {
                found.append(ChildKey(parent: parent, name: missing))
            }
        }
        return found
    }
}
