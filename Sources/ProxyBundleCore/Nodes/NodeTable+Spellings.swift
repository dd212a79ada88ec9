/// Spellings of one name, where names fold (`-o casefold`). The kernel compares names byte for
/// byte, so it looks up `Data` and `DATA` separately. Each spelling of a directory is a node of
/// its own (a directory inode has one dentry: see docs/DESIGN.md), and one of them, the first
/// the kernel looked up, stands for all (`canonical`). Every spelling of a non-directory, through
/// any spelling of its directories, is one node with one more name each, as hard links are:
/// one kernel inode, so one page cache and one set of attributes.
extension NodeTable {
    /// What the spellings of one name share: its directory's standing node and its key (the
    /// key of `name`), and their hash in `State.spellings`, which keeps no key: a node there
    /// is found by its hash and told from others by its own name.
    struct SpelledKey {
        let parent: NodeID
        let name: [UInt8]
        let hash: UInt32
    }

    static func foldedKey(parent: NodeID, name: [UInt8], in s: State) -> SpelledKey {
        let standing = s.canonical[parent] ?? parent
        return SpelledKey(parent: standing, name: name, hash: name.withUnsafeBytes { spellingHash(standing, $0) })
    }

    /// The hash of the key of `name` in the directory whose standing node is `parent`: an
    /// ASCII name's is taken lowered on the fly, any other's folded once.
    private static func spellingHash(_ parent: NodeID, _ name: UnsafeRawBufferPointer) -> UInt32 {
        let folded = FoldedKey.isASCII(name) ? NameHash.hash(name, lowering: true)
            : CaseFold.key(Array(name)).withUnsafeBytes { NameHash.hash($0, lowering: false) }
        return UInt32(truncatingIfNeeded: (folded ^ (UInt64(parent) &* 0x9E37_79B9_7F4A_7C15)) >> 17)
    }

    /// Whether node `id` is now a spelling of `key` (in the table, by its directory and name).
    private static func spells(_ id: NodeID, _ key: SpelledKey, in s: State) -> Bool {
        guard let node = s.nodes[id], node.parent != detachedParent, (s.canonical[node.parent] ?? node.parent) == key.parent
        else { return false }
        return node.name.withBytes { mine in
            key.name.withUnsafeBytes { theirs in
                if FoldedKey.isASCII(mine) && FoldedKey.isASCII(theirs) {
                    return FoldedKey.equal(stored: mine, lowered: true, key: theirs, lowered: true)
                }
                return CaseFold.key(Array(mine)) == CaseFold.key(key.name)
            }
        }
    }

    /// Whether node `id` still has the hash `hash`: its directory and name did not change since
    /// it came into `spellings` (nor its directory's standing node).
    private static func hashes(_ id: NodeID, to hash: UInt32, in s: State) -> Bool {
        guard let node = s.nodes[id], node.parent != detachedParent else { return false }
        return node.name.withBytes { spellingHash(s.canonical[node.parent] ?? node.parent, $0) } == hash
    }

    /// The node that stands for the spellings `folded` of an entry of kind `kind`, if the
    /// table still has it there.
    static func spelled(_ folded: SpelledKey, kind: UInt8, isDirectory: Bool, in s: State) -> NodeID? {
        guard let (_, id) = s.spellings.find(hash: folded.hash, where: { spells($0, folded, in: s) }),
              let node = s.nodes[id], node.kind == kind, node.placement.isDirectory == isDirectory else { return nil }
        return id
    }

    /// A new node `id`, a spelling of `folded`: it stands for them if none does yet (taking
    /// the place of any node that stood for them, and of those of the same hash that moved or
    /// left since); a directory otherwise records the one that does.
    static func recordSpelling(_ id: NodeID, _ folded: SpelledKey, standing: NodeID?, in s: inout State) {
        if let standing {
            s.canonical[id] = s.canonical[standing] ?? standing
            return
        }
        while let (slot, _) = s.spellings.find(hash: folded.hash, where: { other in
            spells(other, folded, in: s) || !hashes(other, to: folded.hash, in: s)
        }) {
            s.spellings.remove(at: slot)
        }
        s.spellings.insert(id, hash: folded.hash)
    }

    /// Node `id` (whose state is `node`) leaves the table.
    static func forgetSpelling(_ id: NodeID, _ node: Node, in s: inout State) {
        guard s.spellings.count > 0 || !s.canonical.isEmpty else { return }
        s.canonical[id] = nil
        let standing = s.canonical[node.parent] ?? node.parent
        let hash = node.name.withBytes { spellingHash(standing, $0) }
        if let slot = s.spellings.slot(of: id, hash: hash) { s.spellings.remove(at: slot) }
    }

    /// The other spellings of directory node `id` that the kernel holds: their cached
    /// attributes and listings are outdated by a change made through `id`.
    func otherSpellings(of id: NodeID) -> [NodeID] {
        guard foldsNames else { return [] }
        return state.withLock { s in
            let standing = s.canonical[id] ?? id
            var others = s.canonical.compactMap { $0.value == standing && $0.key != id ? $0.key : nil }
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
        return state.withLock { s in
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
        return state.withLock { s in
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
        for (node, stands) in s.canonical where stands == standing { directories.insert(node) }
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
