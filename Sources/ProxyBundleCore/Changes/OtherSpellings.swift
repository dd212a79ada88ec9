extension NodeTable {
    /// Where names fold, each spelling of a directory the kernel looks up is a node of its own
    /// (see docs/DESIGN.md), so a change made through one spelling of a path leaves the nodes
    /// of the others behind (a directory copied up through `DATA` is still below the
    /// substitution for `Data`). After every change, every node is therefore resolved again at
    /// its next use, and the directories' descriptors are dropped: one pass over the node table
    /// per change, and nothing at all without folding. The kernel is told to forget what it
    /// keeps of the other spellings of the directories `changed` (their attributes and
    /// listings), and the names `made` (no longer missing in any spelling) and `gone` (whose
    /// other spellings, other names of one node, no longer lead to it) name: the request keeps
    /// them until its reply (the change holds its locks now).
    func forgetOtherSpellings(_ request: Request, changed: [NodeID] = [], made: [(parent: NodeID, name: [UInt8])] = [],
                              gone: [(parent: NodeID, name: [UInt8])] = []) {
        guard request.layers.foldsNames else { return }
        var names: [NodeTable.ChildKey] = []
        for (parent, name) in made { names += takeAbsentSpellings(of: name, in: parent) }
        for (parent, name) in gone { names += takeOtherSpellings(of: name, in: parent, keeping: made.first) }
        markStale(under: rootNodeID)
        request.directories.removeAll()
        // what the substitution holds changed: its spellings are read again
        request.layers.substitution?.layer.spellings?.forget()
        let others = changed.flatMap(otherSpellings)
        guard !others.isEmpty || !names.isEmpty else { return }
        request.keep(forgetting: others, names: names.map { ($0.parent, $0.name) })
    }
}
