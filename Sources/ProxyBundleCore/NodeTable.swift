/// Identifies a node to the kernel. Allocated by the overlay, monotonically, never reused.
public typealias NodeID = UInt64

public let rootNodeID: NodeID = 1

/// Which layers hold a node's entry. A non-directory lives in exactly one layer; a directory
/// may be merged from both.
public struct Placement: Equatable, Sendable {
    /// The substitution has an entry at this path, and it serves the node's attributes.
    public var inUpper: Bool
    /// The main bundle's entry at this path is visible (for a directory: merged in).
    public var inLower: Bool
    public var isDirectory: Bool

    public init(inUpper: Bool, inLower: Bool, isDirectory: Bool) {
        self.inUpper = inUpper
        self.inLower = inLower
        self.isDirectory = isDirectory
    }
}

/// The nodes the kernel knows about: each has a parent and a name, so its path is computed
/// from the chain, and a lookup count the kernel decrements with FORGET.
final class NodeTable: Sendable {
    private struct Node {
        var parent: NodeID
        var name: [UInt8]
        var lookups: UInt64
        var placement: Placement
    }

    private struct ChildKey: Hashable {
        var parent: NodeID
        var name: [UInt8]
    }

    private struct State {
        var nodes: [NodeID: Node] = [:]
        var children: [ChildKey: NodeID] = [:]
        var nextID: NodeID = rootNodeID + 1
    }

    private let state: Locked<State>

    init(root: Placement) {
        var initial = State()
        initial.nodes[rootNodeID] = Node(parent: rootNodeID, name: [], lookups: 1, placement: root)
        state = Locked(initial)
    }

    /// The node's path in the layers and its placement; ESTALE for a node the kernel forgot.
    func location(of id: NodeID) throws(Errno) -> (path: LayerPath, placement: Placement, parent: NodeID) {
        try state.withLock { (s: inout State) throws(Errno) -> (LayerPath, Placement, NodeID) in
            guard let node = s.nodes[id] else { throw Errno.stale }
            if id == rootNodeID { return (.root, node.placement, rootNodeID) }
            var names: [[UInt8]] = [node.name]
            var length = node.name.count
            var current = node.parent
            while current != rootNodeID {
                guard let ancestor = s.nodes[current] else { throw Errno.stale }
                names.append(ancestor.name)
                length += ancestor.name.count + 1
                current = ancestor.parent
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(length)
            for name in names.reversed() {
                if !bytes.isEmpty { bytes.append(UInt8(ascii: "/")) }
                bytes.append(contentsOf: name)
            }
            return (LayerPath(bytes: bytes), node.placement, node.parent)
        }
    }

    /// Records one more kernel reference to the child `name` of `parent`, creating its node if
    /// needed, and returns its ID. The placement is refreshed to what was just resolved.
    func remember(parent: NodeID, name: [UInt8], placement: Placement) -> NodeID {
        state.withLock { s in
            let key = ChildKey(parent: parent, name: name)
            if let id = s.children[key] {
                s.nodes[id]?.lookups += 1
                s.nodes[id]?.placement = placement
                return id
            }
            let id = s.nextID
            s.nextID += 1
            s.nodes[id] = Node(parent: parent, name: name, lookups: 1, placement: placement)
            s.children[key] = id
            return id
        }
    }

    /// Drops `count` kernel references; a node with none left is removed.
    func forget(_ id: NodeID, count: UInt64) {
        guard id != rootNodeID else { return }
        state.withLock { s in
            guard var node = s.nodes[id] else { return }
            node.lookups = node.lookups > count ? node.lookups - count : 0
            if node.lookups > 0 {
                s.nodes[id] = node
                return
            }
            s.nodes[id] = nil
            let key = ChildKey(parent: node.parent, name: node.name)
            if s.children[key] == id { s.children[key] = nil }
        }
    }

    var count: Int { state.withLock { $0.nodes.count } }
}
