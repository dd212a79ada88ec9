/// Spellings of one name, where names fold (`-o casefold`). The kernel compares names byte for
/// byte, so it looks up `Data` and `DATA` separately. Each spelling of a directory is a node of
/// its own (a directory inode has one dentry: see docs/DESIGN.md), and one of them, the first
/// the kernel looked up, stands for all (`canonical`). Every spelling of a non-directory, through
/// any spelling of its directories, is one node with one more name each, as hard links are:
/// one kernel inode, so one page cache and one set of attributes.
extension NodeTable {
    /// What the spellings of one name share: its directory's standing node and its folded name.
    static func foldedKey(parent: NodeID, name: [UInt8], in s: State) -> ChildKey {
        ChildKey(parent: s.canonical[parent] ?? parent, name: CaseFold.keyIfDifferent(name) ?? name)
    }

    /// The node that stands for the spellings `folded` of an entry of kind `kind`, if the
    /// table still has it there.
    static func spelled(_ folded: ChildKey, kind: UInt8, isDirectory: Bool, in s: State) -> NodeID? {
        guard let id = s.spellings[folded], let node = s.nodes[id], node.kind == kind,
              node.placement.isDirectory == isDirectory, node.parent != detachedParent,
              foldedKey(parent: node.parent, name: node.name.bytes, in: s) == folded else { return nil }
        return id
    }

    /// A new node `id`, a spelling `key` of `folded`: it stands for them if none does yet;
    /// a directory otherwise records the one that does.
    static func recordSpelling(_ id: NodeID, _ folded: ChildKey, standing: NodeID?, in s: inout State) {
        if let standing {
            s.canonical[id] = s.canonical[standing] ?? standing
        } else {
            s.spellings[folded] = id
        }
    }

    /// Node `id` (whose state is `node`) leaves the table.
    static func forgetSpelling(_ id: NodeID, _ node: Node, in s: inout State) {
        guard !s.spellings.isEmpty else { return }
        s.canonical[id] = nil
        let folded = foldedKey(parent: node.parent, name: node.name.bytes, in: s)
        if s.spellings[folded] == id { s.spellings[folded] = nil }
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
