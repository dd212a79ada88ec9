/// The names resolved as missing (the negative lookup cache), by directory, so that a
/// listing can leave out what a lookup there would deny (see `Overlay.listDirectory`).
struct AbsentNames: Sequence {
    private var byParent: [NodeID: Set<[UInt8]>] = [:]
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    func contains(_ key: NodeTable.ChildKey) -> Bool {
        byParent[key.parent]?.contains(key.name) ?? false
    }

    mutating func insert(_ key: NodeTable.ChildKey) {
        if byParent[key.parent, default: []].insert(key.name).inserted { count += 1 }
    }

    mutating func remove(_ key: NodeTable.ChildKey) {
        guard byParent[key.parent]?.remove(key.name) != nil else { return }
        count -= 1
        if byParent[key.parent]?.isEmpty == true { byParent[key.parent] = nil }
    }

    mutating func removeAll() {
        byParent = [:]
        count = 0
    }

    /// Takes out the names of the directories `isWanted` accepts, and returns them.
    mutating func removeAll(inDirectories isWanted: (NodeID) -> Bool) -> [NodeTable.ChildKey] {
        var removed: [NodeTable.ChildKey] = []
        for (parent, names) in byParent where isWanted(parent) {
            removed += names.map { NodeTable.ChildKey(parent: parent, name: $0) }
            byParent[parent] = nil
        }
        count -= removed.count
        return removed
    }

    /// The names missing from directory `parent`, if any is known.
    func names(in parent: NodeID) -> Set<[UInt8]>? {
        byParent[parent]
    }

    func makeIterator() -> AnyIterator<NodeTable.ChildKey> {
        var parents = byParent.makeIterator()
        var current: (parent: NodeID, names: Set<[UInt8]>.Iterator)? = nil
        return AnyIterator {
            while true {
                if let name = current?.names.next(), let parent = current?.parent {
                    return NodeTable.ChildKey(parent: parent, name: name)
                }
                guard let (parent, names) = parents.next() else { return nil }
                current = (parent, names.makeIterator())
            }
        }
    }
}
