/// The names that lead to nodes: a node's own name through the `ChildIndex`, which keeps no
/// copy of it, and hard links' other names in `aliasNames`. The table changes them only
/// through these, which keep the index's rule: a node leaves it before its name changes.
extension NodeTable.State {
    /// The node `key` leads to.
    func child(_ key: NodeTable.ChildKey) -> NodeID? {
        child(key, hash: named.hash(key.parent, key.name))
    }

    /// The node `key`, whose index hash is `hash`, leads to.
    func child(_ key: NodeTable.ChildKey, hash: UInt32) -> NodeID? {
        if let (_, id) = named.find(key.parent, key.name, hash: hash, in: nodes) { return id }
        return aliasNames.isEmpty ? nil : aliasNames[key]
    }

    /// `key` now leads to node `id` (and no longer to any other node).
    mutating func setChild(_ key: NodeTable.ChildKey, _ id: NodeID) {
        let hash = named.hash(key.parent, key.name)
        _ = removeChild(key, hash: hash)
        if let node = nodes[id], node.parent == key.parent, node.name.matches(key.name) {
            named.insert(id, hash: hash)
        } else {
            aliasNames[key] = id
        }
    }

    /// Indexes new node `id` under its own name, whose hash is `hash` and which leads to no
    /// node: a lookup that makes a node hashes its name once, where `setChild` looks again.
    mutating func indexNew(_ id: NodeID, hash: UInt32) {
        named.insert(id, hash: hash)
    }

    /// Takes `key` away from the node it leads to, and returns that node.
    mutating func removeChild(_ key: NodeTable.ChildKey) -> NodeID? {
        removeChild(key, hash: named.hash(key.parent, key.name))
    }

    private mutating func removeChild(_ key: NodeTable.ChildKey, hash: UInt32) -> NodeID? {
        if let (slot, id) = named.find(key.parent, key.name, hash: hash, in: nodes) {
            named.remove(at: slot)
            return id
        }
        return aliasNames.isEmpty ? nil : aliasNames.removeValue(forKey: key)
    }

    /// Gives node `id` (which has no name in the index) the parent and name of `key`; the
    /// caller then links `key` to it.
    mutating func rename(_ id: NodeID, to key: NodeTable.ChildKey) {
        guard var node = nodes[id] else { return }
        unindex(id, node)
        node.parent = key.parent
        node.name = NodeName(key.name)
        nodes[id] = node
    }

    /// Takes node `id`'s own name out of the index (before it changes or the node goes).
    mutating func unindex(_ id: NodeID, _ node: NodeTable.Node) {
        let hash = node.name.withBytes { named.hash(node.parent, $0) }
        if let slot = named.slot(of: id, hash: hash) { named.remove(at: slot) }
    }

    /// Every name that leads to a node (`heldOnly`: to a node the kernel holds).
    func childKeys(heldOnly: Bool = false) -> [NodeTable.ChildKey] { childKeys(in: { _ in true }, heldOnly: heldOnly) }

    /// The names that lead to nodes in the directories `isWanted` accepts (a name's bytes are
    /// copied out of its node only when its directory is wanted). A node's own name is in the
    /// index unless the node was detached (see `rename(_:to:)`: the table takes a name out of
    /// the index only to give the node another), so the nodes are read in place, page by page.
    func childKeys(in isWanted: (NodeID) -> Bool, heldOnly: Bool = false) -> [NodeTable.ChildKey] {
        var keys: [NodeTable.ChildKey] = []
        nodes.forEach { id, node in
            if id != rootNodeID, node.parent != NodeTable.detachedParent, !heldOnly || node.lookups > 0, isWanted(node.parent) {
                keys.append(NodeTable.ChildKey(parent: node.parent, name: node.name.bytes))
            }
        }
        for (key, id) in aliasNames where isWanted(key.parent) && (!heldOnly || (nodes[id]?.lookups ?? 0) > 0) { keys.append(key) }
        return keys
    }
}
