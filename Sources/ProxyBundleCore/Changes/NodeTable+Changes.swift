/// Exact invalidation: forgetting just the names that changed on disk (as `LayerWatch` saw
/// them), so everything else stays cached in the daemon and in the kernel.
extension NodeTable {
    /// Forgets what `changes` name. Directory nodes that have cached names but are not
    /// watched as they are placed now (`watched`: their placements when watched, read from
    /// `LayerWatch` before) have all their names forgotten. Returns
    /// what the kernel must drop, and the directory nodes whose names now lead elsewhere
    /// (their watches are outdated).
    func invalidate(changes: [LayerWatch.Change], watched: [NodeID: Placement]) -> (Invalidation, replaced: [NodeID]) {
        locked { s in
            s.version &+= 1
            NodeTable.removeOrphans(in: &s)
            var changes = changes
            var unwatched: [NodeID: Bool] = [:]
            func isUnwatched(_ id: NodeID) -> Bool {
                if let known = unwatched[id] { return known }
                let answer = s.nodes[id].map { watched[id] != $0.placement } ?? false
                unwatched[id] = answer
                return answer
            }
            for key in s.childKeys(in: isUnwatched) {
                changes.append(LayerWatch.Change(directory: key.parent, name: key.name, structural: true))
            }
            for key in s.absent where isUnwatched(key.parent) {
                changes.append(LayerWatch.Change(directory: key.parent, name: key.name, structural: true))
            }
            if foldsNames {
                // a change of one spelling is a change of every spelling the kernel may hold
                for change in changes where !change.name.isEmpty {
                    for key in NodeTable.spellings(of: change.name, in: change.directory, in: s) {
                        changes.append(LayerWatch.Change(directory: key.parent, name: key.name, structural: change.structural))
                    }
                }
            }
            var entries = Set<ChildKey>()
            var nodes = Set<NodeID>()
            var roots = Set<NodeID>()
            var wholeDirectories = Set<NodeID>()
            for change in changes where s.nodes[change.directory] != nil {
                if change.name.isEmpty {
                    // the directory's opaque marker came or went: it and all beneath it
                    wholeDirectories.insert(change.directory)
                    roots.insert(change.directory)
                    nodes.insert(change.directory)
                    if change.directory != rootNodeID { s.nodes[change.directory]?.freshIn = 0 }
                    continue
                }
                let key = ChildKey(parent: change.directory, name: change.name)
                let child = s.child(key).flatMap { id in s.nodes[id].map { (id, $0) } }
                guard change.structural else {
                    if let (id, _) = child { nodes.insert(id) }
                    continue
                }
                entries.insert(key)
                nodes.insert(change.directory)  // its listing
                s.absent.remove(key)
                if let (id, node) = child {
                    s.nodes[id]?.freshIn = 0
                    if node.placement.isDirectory { roots.insert(id) }
                    if NodeTable.outlivesEntry(id, node, in: s) { nodes.insert(id) }
                }
            }
            if !roots.isEmpty {
                let (outliving, inside) = NodeTable.markStale(beneath: roots, in: &s)
                nodes.formUnion(outliving)
                let absentBeneath = s.absent.removeAll(inDirectories: inside.contains)
                // the kernel drops what lies beneath a name it drops; a directory whose
                // opaque marker changed keeps its own name, so its names go one by one
                for key in absentBeneath where wholeDirectories.contains(key.parent) { entries.insert(key) }
                for key in s.childKeys(in: wholeDirectories.contains) { entries.insert(key) }
            }
            let result = Invalidation(entries: entries.map { ($0.parent, $0.name) }, nodes: Array(nodes))
            return (result, Array(roots))
        }
    }

    /// The directory node at `path` from the root, through the names the table holds; nil
    /// where a name on the way has no node.
    func directoryNode(at path: LayerPath) -> NodeID? {
        locked { s -> NodeID? in
            var current = rootNodeID
            for name in path.bytes.split(separator: UInt8(ascii: "/")) {
                guard let next = s.child(ChildKey(parent: current, name: Array(name))) else { return nil }
                current = next
            }
            return s.nodes[current]?.placement.isDirectory == true ? current : nil
        }
    }
}
