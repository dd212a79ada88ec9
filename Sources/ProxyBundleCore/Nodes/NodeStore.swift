/// The nodes by ID, in pages of 256 consecutive IDs: a node costs its 64 bytes and nothing
/// more (a hash table would add its key and keep up to half its buckets empty). IDs are
/// handed out in order and never reused, so the nodes made together share pages; a page goes
/// when its last node does. A node stays after the kernel forgot it (no lookups left) while
/// its file has a name (see `NodeTable.forget`); an empty slot has the parent `vacant`.
struct NodeStore {
    final class Page {
        var slots: [NodeTable.Node]
        var used = 0

        init() {
            slots = Array(repeating: NodeStore.empty, count: NodeStore.pageSize)
        }
    }

    static let pageSize = 256
    /// The parent of an empty slot: no node's ID.
    static let vacant = NodeID.max
    static let empty = NodeTable.Node(parent: vacant, name: [], lookups: 0, placement: .file(in: 0))

    private var pages: [NodeID: Page] = [:]
    /// The nodes stored.
    private(set) var count = 0
    /// The nodes the kernel holds (with lookups left).
    private(set) var held = 0

    private static func place(_ id: NodeID) -> (page: NodeID, slot: Int) {
        (id / NodeID(pageSize), Int(id % NodeID(pageSize)))
    }

    subscript(id: NodeID) -> NodeTable.Node? {
        get {
            let (page, slot) = NodeStore.place(id)
            guard let node = pages[page]?.slots[slot], node.parent != NodeStore.vacant else { return nil }
            return node
        }
        set {
            let (index, slot) = NodeStore.place(id)
            if let node = newValue {
                let page = pages[index] ?? {
                    let made = Page()
                    pages[index] = made
                    return made
                }()
                let old = page.slots[slot]
                if old.parent == NodeStore.vacant {
                    page.used += 1
                    count += 1
                } else if old.lookups > 0 {
                    held -= 1
                }
                if node.lookups > 0 { held += 1 }
                page.slots[slot] = node
            } else if let page = pages[index], page.slots[slot].parent != NodeStore.vacant {
                if page.slots[slot].lookups > 0 { held -= 1 }
                page.slots[slot] = NodeStore.empty
                page.used -= 1
                count -= 1
                if page.used == 0 { pages[index] = nil }
            }
        }
    }

    /// Changes every node in place but the one of `except`, in no particular order.
    func update(except: NodeID, _ body: (inout NodeTable.Node) -> Void) {
        for (index, page) in pages {
            for slot in 0..<NodeStore.pageSize where page.slots[slot].parent != NodeStore.vacant {
                if index * NodeID(NodeStore.pageSize) + NodeID(slot) != except { body(&page.slots[slot]) }
            }
        }
    }

    /// Changes every node in place but the one of `except`, given its ID, in no particular order.
    func updateWithIDs(except: NodeID, _ body: (NodeID, inout NodeTable.Node) -> Void) {
        for (index, page) in pages {
            for slot in 0..<NodeStore.pageSize where page.slots[slot].parent != NodeStore.vacant {
                let id = index * NodeID(NodeStore.pageSize) + NodeID(slot)
                if id != except { body(id, &page.slots[slot]) }
            }
        }
    }

    /// Calls `body` with every node, in no particular order.
    func forEach(_ body: (NodeID, borrowing NodeTable.Node) -> Void) {
        for (index, page) in pages {
            for slot in 0..<NodeStore.pageSize where page.slots[slot].parent != NodeStore.vacant {
                body(index * NodeID(NodeStore.pageSize) + NodeID(slot), page.slots[slot])
            }
        }
    }
}
