/// Which node a name in a directory leads to, for nodes that carry that name themselves: a
/// slot holds a node ID and a hash of the node's parent and name, and the name's bytes stay
/// in the node, stored once. Open addressing with linear probing, at most three quarters
/// full: 12 bytes a slot, where a dictionary keyed by parent and name took 24 and an array
/// for the name.
///
/// Where names fold (`folds`), a name is hashed by its key (see `CaseFold`), so every
/// spelling of one name in one directory is in one probe chain: the node that stands for
/// them is found there (see NodeTable+Spellings.swift), with no index of its own.
///
/// A node must leave the index before its parent or name changes, and before it leaves the
/// node store: the index finds an entry by the node's current name.
struct ChildIndex {
    /// 0 marks an empty slot (0 is no node's ID).
    private var ids: [NodeID] = []
    private var hashes: [UInt32] = []
    private(set) var count = 0
    /// Whether names are hashed by their keys (`-o casefold`).
    let folds: Bool

    init(folds: Bool = false) {
        self.folds = folds
    }

    /// The hash of `name` in `parent`, by its key where names fold.
    func hash(_ parent: NodeID, _ name: UnsafeRawBufferPointer) -> UInt32 {
        folds ? ChildIndex.foldedHash(parent, name) : ChildIndex.hash(parent, name)
    }

    func hash(_ parent: NodeID, _ name: [UInt8]) -> UInt32 {
        name.withUnsafeBytes { hash(parent, $0) }
    }

    static func hash(_ parent: NodeID, _ name: UnsafeRawBufferPointer) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(parent)
        hasher.combine(bytes: name)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// The hash of the key of `name` in `parent`: an ASCII name's is taken lowered on the fly,
    /// any other's folded first.
    static func foldedHash(_ parent: NodeID, _ name: UnsafeRawBufferPointer) -> UInt32 {
        let folded = FoldedKey.isASCII(name) ? NameHash.hash(name, lowering: true)
            : CaseFold.key(name).withUnsafeBytes { NameHash.hash($0, lowering: false) }
        return UInt32(truncatingIfNeeded: (folded ^ (UInt64(parent) &* 0x9E37_79B9_7F4A_7C15)) >> 17)
    }

    /// The node named `name` in `parent` (whose hash is `hash`), and its slot.
    func find(_ parent: NodeID, _ name: [UInt8], hash: UInt32, in nodes: NodeStore) -> (slot: Int, id: NodeID)? {
        guard count > 0 else { return nil }
        let mask = ids.count - 1
        var slot = Int(hash) & mask
        while ids[slot] != 0 {
            if hashes[slot] == hash, let node = nodes[ids[slot]], node.parent == parent, node.name.matches(name) {
                return (slot, ids[slot])
            }
            slot = (slot + 1) & mask
        }
        return nil
    }

    /// Calls `body` with every node of hash `hash`: where names fold, each node named in
    /// one directory with one key (see NodeTable+Spellings.swift), among others.
    func forEach(hash: UInt32, _ body: (NodeID) -> Void) {
        guard count > 0 else { return }
        let mask = ids.count - 1
        var slot = Int(hash) & mask
        while ids[slot] != 0 {
            if hashes[slot] == hash { body(ids[slot]) }
            slot = (slot + 1) & mask
        }
    }

    /// The slot of node `id`, found by the hash of its current parent and name.
    func slot(of id: NodeID, hash: UInt32) -> Int? {
        guard count > 0 else { return nil }
        let mask = ids.count - 1
        var slot = Int(hash) & mask
        while ids[slot] != 0 {
            if ids[slot] == id { return slot }
            slot = (slot + 1) & mask
        }
        return nil
    }

    /// Adds node `id`, whose parent and name hash to `hash` (no other entry may have them).
    mutating func insert(_ id: NodeID, hash: UInt32) {
        if (count + 1) * 4 > ids.count * 3 { grow() }
        place(id, hash)
        count += 1
    }

    /// Empties `slot`, moving back the entries after it that would no longer be found.
    mutating func remove(at slot: Int) {
        let mask = ids.count - 1
        var hole = slot
        var next = (slot + 1) & mask
        while ids[next] != 0 {
            let home = Int(hashes[next]) & mask
            // the entry at `next` may fill the hole unless its home lies after the hole
            let reachable = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if reachable {
                ids[hole] = ids[next]
                hashes[hole] = hashes[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        ids[hole] = 0
        hashes[hole] = 0
        count -= 1
    }

    private mutating func place(_ id: NodeID, _ hash: UInt32) {
        let mask = ids.count - 1
        var slot = Int(hash) & mask
        while ids[slot] != 0 { slot = (slot + 1) & mask }
        ids[slot] = id
        hashes[slot] = hash
    }

    private mutating func grow() {
        let oldIDs = ids
        let oldHashes = hashes
        let capacity = Swift.max(16, ids.count * 2)
        ids = Array(repeating: 0, count: capacity)
        hashes = Array(repeating: 0, count: capacity)
        for (id, hash) in zip(oldIDs, oldHashes) where id != 0 { place(id, hash) }
    }
}
