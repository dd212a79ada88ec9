/// The nodes by ID, in pages of 256 consecutive IDs: a node costs its 40 bytes and nothing
/// more (a hash table would add its key and keep up to half its buckets empty). IDs are
/// handed out in order and never reused, so the nodes made together share pages; a page goes
/// when its last node does. A slot is empty when its node has no kernel references, which no
/// stored node lacks.
struct NodeStore {
    final class Page {
        var slots: [NodeTable.Node]
        var live = 0

        init() {
            slots = Array(repeating: NodeStore.empty, count: NodeStore.pageSize)
        }
    }

    static let pageSize = 256
    static let empty = NodeTable.Node(parent: 0, name: [], lookups: 0, placement: .file(in: 0))

    private var pages: [NodeID: Page] = [:]
    private(set) var count = 0

    private static func place(_ id: NodeID) -> (page: NodeID, slot: Int) {
        (id / NodeID(pageSize), Int(id % NodeID(pageSize)))
    }

    subscript(id: NodeID) -> NodeTable.Node? {
        get {
            let (page, slot) = NodeStore.place(id)
            guard let node = pages[page]?.slots[slot], node.lookups > 0 else { return nil }
            return node
        }
        set {
            let (index, slot) = NodeStore.place(id)
            if let node = newValue, node.lookups > 0 {
                let page = pages[index] ?? {
                    let made = Page()
                    pages[index] = made
                    return made
                }()
                if page.slots[slot].lookups == 0 {
                    page.live += 1
                    count += 1
                }
                page.slots[slot] = node
            } else if let page = pages[index], page.slots[slot].lookups > 0 {
                page.slots[slot] = NodeStore.empty
                page.live -= 1
                count -= 1
                if page.live == 0 { pages[index] = nil }
            }
        }
    }

    /// Calls `body` with every node, in no particular order.
    func forEach(_ body: (NodeID, borrowing NodeTable.Node) -> Void) {
        for (index, page) in pages {
            for slot in 0..<NodeStore.pageSize where page.slots[slot].lookups > 0 {
                body(index * NodeID(NodeStore.pageSize) + NodeID(slot), page.slots[slot])
            }
        }
    }
}
