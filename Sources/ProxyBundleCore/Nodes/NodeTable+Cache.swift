#if canImport(Glibc)
import Glibc
#endif

/// The node table as the daemon's lookup cache. A lookup of a name whose node is fresh (and
/// whose ancestors are) is answered from its stored placement with one `stat`; a name found
/// missing is remembered as absent and answered without touching the disk. Changes made
/// through the mount update the table as they happen; `invalidate` forgets what may have
/// changed on disk behind the daemon's back.
extension NodeTable {
    /// What the cache knows about a name.
    enum Cached {
        /// The name is known to be missing.
        case absent
        /// The name's node (one more kernel reference was counted) and its location.
        case found(NodeID, Location)
        /// Not cached, or not fresh: resolve it.
        case unknown
    }

    /// Upper bound of the absent-name set; past it the set starts over. Tests lower it with
    /// `PROXYBUNDLE_ABSENT_LIMIT` in the environment.
    static let absentLimit = getenv("PROXYBUNDLE_ABSENT_LIMIT").flatMap { Int(String(cString: $0)) } ?? 1 << 20

    /// The cached answer for `name` in `parent`, counting a hit or a miss. A found node gets
    /// one more kernel reference in the same step, so a concurrent FORGET cannot drop it.
    func cachedLookup(parent: NodeID, name: [UInt8], in generation: Generation) -> Cached {
        locked { s in
            let key = ChildKey(parent: parent, name: name)
            if s.absent.contains(key) {
                s.hits += 1
                return .absent
            }
            if let id = s.child(key), let location = try? NodeTable.location(of: id, in: s, generation), location.isFresh {
                s.hits += 1
                s.nodes[id]?.addLookup()
                return .found(id, location)
            }
            s.misses += 1
            return .unknown
        }
    }

    /// Remembers that `name` is missing from `parent`, unless names changed since the lookup
    /// began (`resolvedAt`), the parent is not fresh, or the layers were swapped (another
    /// `generation`). Returns whether it was stored, and the names it took the place of: past
    /// `absentLimit` the set starts over, and the kernel must forget them too, as it keeps
    /// its own negative entry of each name the daemon remembers (an invalidation names only
    /// those). They are handed over whole, and freed by the caller, not under the table's lock
    /// (a million names took 0.8 s to free in a debug build).
    @discardableResult
    func rememberAbsent(parent: NodeID, name: [UInt8], resolvedAt: UInt64,
                        in generation: Generation) -> (stored: Bool, dropped: AbsentNames?) {
        locked { s in
            guard s.version == resolvedAt, s.generation == generation.number,
                  (try? NodeTable.location(of: parent, in: s, generation))?.isFresh == true else { return (false, nil) }
            var dropped: AbsentNames? = nil
            if s.absent.count >= NodeTable.absentLimit {
                dropped = s.absent  // the names' storage goes with it, to be freed unlocked
                s.absent = AbsentNames()
            }
            s.absent.insert(ChildKey(parent: parent, name: name))
            return (true, dropped)
        }
    }

    /// `name` was found missing from `parent`: a node the kernel forgot that still had the name
    /// goes (its file was removed behind the daemon's back), unless names changed since the
    /// lookup began (`resolvedAt`).
    func dropForgotten(parent: NodeID, name: [UInt8], resolvedAt: UInt64) {
        locked { s in
            let key = ChildKey(parent: parent, name: name)
            guard s.version == resolvedAt, let id = s.child(key), s.nodes[id]?.lookups == 0 else { return }
            NodeTable.unlink(key, from: &s)
        }
    }

    /// The names remembered as missing from directory `parent`, if any.
    func absentNames(in parent: NodeID) -> Set<[UInt8]>? {
        locked { $0.absent.names(in: parent) }
    }

    /// A stale node was resolved again: same kind (and, for a non-directory, the same file):
    /// it takes the new placement and is fresh. Otherwise its name is taken away from it
    /// (the kernel will look the name up and get a new node). Resolved in an older
    /// `generation` than the table's, it changes nothing.
    func refresh(_ id: NodeID, placement: Placement, kind: UInt8, identity: UInt64, in generation: Generation) {
        locked { s in
            guard s.generation == generation.number, var node = s.nodes[id] else { return }
            let same = node.kind == kind && node.placement.isDirectory == placement.isDirectory
                && (placement.isDirectory || node.identity == identity || node.identity == 0)
            if same {
                node.placement = placement
                node.identity = identity
                node.freshIn = s.generation
                s.nodes[id] = node
            } else if id != rootNodeID {
                NodeTable.unlink(ChildKey(parent: node.parent, name: node.name.bytes), from: &s)
            }
        }
    }

    /// Takes `id`'s name away from it: the kernel, told ESTALE, looks the name up again and
    /// gets a new node. Also what becomes of a stale node whose name no longer resolves.
    func detachName(of id: NodeID) {
        locked { s in
            guard id != rootNodeID, let node = s.nodes[id] else { return }
            s.version &+= 1
            NodeTable.unlink(ChildKey(parent: node.parent, name: node.name.bytes), from: &s)
        }
    }

    /// The parent and name of a node, for resolving it again.
    func nameOf(_ id: NodeID, in generation: Generation) -> (parent: NodeID, name: [UInt8], fresh: Bool)? {
        locked { s in s.nodes[id].map { ($0.parent, $0.name.bytes, s.isFresh(id, $0, in: generation.number)) } }
    }

    /// What an invalidation touched, for the kernel's caches: the names (positive and
    /// negative), and the nodes whose kernel inode may outlive its name's entry: directories
    /// (a process's working directory holds one) and open files. Any other inode goes away
    /// with its invalidated entry, its attributes and pages with it.
    struct Invalidation {
        var entries: [(parent: NodeID, name: [UInt8])] = []
        var nodes: [NodeID] = []
    }

    /// Forgets what may have changed on disk: everything (no `subtree`), or the names along
    /// `subtree` (a path of names from the root) and everything beneath it. Touched nodes
    /// become stale and are resolved again on their next use; absent names are dropped.
    /// The root's placement is `rootPlacement`; if that changed (an opaque marker came or
    /// went), everything is invalidated.
    /// Without `listingNames`, the names are not collected (the kernel is told otherwise).
    func invalidate(subtree: [[UInt8]]? = nil, root rootPlacement: Placement, listingNames: Bool = true) -> Invalidation {
        locked { s in
            s.version &+= 1
            NodeTable.removeOrphans(in: &s)
            var result = Invalidation()
            let rootChanged = s.nodes[rootNodeID]?.placement != rootPlacement
            s.nodes[rootNodeID]?.placement = rootPlacement
            guard let subtree, !rootChanged else {
                if listingNames {
                    result.entries = s.childKeys(heldOnly: true).map { ($0.parent, $0.name) } + s.absent.map { ($0.parent, $0.name) }
                }
                s.absent.removeAll()
                s.generation = s.generation == UInt32.max ? 1 : s.generation + 1
                s.nodes.forEach { id, node in
                    if NodeTable.outlivesEntry(id, node, in: s) { result.nodes.append(id) }
                }
                return result
            }
            // the names along the path (where names fold, every spelling of each)
            var along: [NodeID] = [rootNodeID]
            var current: Set<NodeID> = [rootNodeID]
            for name in subtree {
                var next: Set<NodeID> = []
                for parent in current {
                    let keys = foldsNames ? NodeTable.spellings(of: name, in: parent, in: s) + [ChildKey(parent: parent, name: name)]
                        : [ChildKey(parent: parent, name: name)]
                    for key in Set(keys) {
                        result.entries.append((key.parent, key.name))
                        s.absent.remove(key)
                        if let id = s.child(key) { next.insert(id) }
                    }
                }
                along += next
                current = next
            }
            result.nodes = along.filter { id in s.nodes[id].map { NodeTable.outlivesEntry(id, $0, in: s) } ?? false }
            for id in along.dropFirst() { s.nodes[id]?.freshIn = 0 }
            guard !current.isEmpty else { return result }
            // everything beneath the path's last nodes
            let (outliving, inside) = NodeTable.markStale(beneath: current, in: &s)
            result.nodes += outliving
            if listingNames {
                result.entries += s.childKeys(in: inside.contains, heldOnly: true).map { ($0.parent, $0.name) }
            }
            let dropped = s.absent.removeAll(inDirectories: inside.contains)
            result.entries += dropped.map { ($0.parent, $0.name) }
            return result
        }
    }

    /// Whether the kernel may hold node `id`'s inode without its entry.
    static func outlivesEntry(_ id: NodeID, _ node: Node, in s: State) -> Bool {
        node.lookups > 0 && (node.placement.isDirectory || !s.extras(of: id, node).openFiles.isEmpty)
    }

    /// Everything beneath `top` is stale, its file identities unknown (after the daemon itself
    /// rebuilt the tree, as materializing a directory does).
    func markStale(under top: NodeID) {
        locked { s in
            s.version &+= 1
            guard top != rootNodeID else {
                // everything: no node need be looked for (a casefold mount does this at every change)
                return s.nodes.update(except: rootNodeID) { node in
                    node.freshIn = 0
                    node.identity = 0
                }
            }
            _ = NodeTable.markStale(beneath: [top], in: &s, forgettingIdentities: true)
        }
    }

    /// Makes every node beneath `tops` (not the tops themselves) stale. Returns those whose
    /// kernel inode may outlive its entry, and the tops with every directory beneath them.
    /// `inNewGeneration`: a swap made them stale by starting a new generation, and they keep
    /// the one they were resolved in (see `finishSwap`).
    static func markStale(beneath tops: Set<NodeID>, in s: inout State, forgettingIdentities: Bool = false,
                          inNewGeneration: Bool = false) -> (outliving: [NodeID], inside: Set<NodeID>) {
        var inside = tops
        var outside = Set<NodeID>()
        var outliving: [NodeID] = []
        var beneath: [NodeID] = []
        s.nodes.forEach { id, node in
            // a node lies beneath the tops where its directory does (memoized by directory)
            guard !tops.contains(id), NodeTable.isInside(node.parent, s, &inside, &outside) else { return }
            if node.placement.isDirectory { inside.insert(id) }
            beneath.append(id)
            if NodeTable.outlivesEntry(id, node, in: s) { outliving.append(id) }
        }
        for id in beneath where !inNewGeneration {
            s.nodes[id]?.freshIn = 0
            if forgettingIdentities { s.nodes[id]?.identity = 0 }
        }
        return (outliving, inside)
    }

    /// Whether `id` is or lies beneath a node of `inside`, which memoizes the nodes known to,
    /// as `outside` those known not to.
    private static func isInside(_ id: NodeID, _ s: State, _ inside: inout Set<NodeID>, _ outside: inout Set<NodeID>) -> Bool {
        var chain: [NodeID] = []
        var current = id
        while true {
            if inside.contains(current) {
                inside.formUnion(chain)
                return true
            }
            guard current != rootNodeID, current != NodeTable.detachedParent, !outside.contains(current),
                  let node = s.nodes[current] else {
                outside.formUnion(chain)
                return false
            }
            chain.append(current)
            current = node.parent
        }
    }

    /// Figures for `.stats`.
    struct Statistics {
        /// Nodes the kernel holds.
        var nodes: Int
        /// Nodes it forgot, kept for their file handles.
        var forgotten: Int
        var absent: Int
        var hits: UInt64
        var misses: UInt64
    }

    var statistics: Statistics {
        locked { Statistics(nodes: $0.nodes.held, forgotten: $0.nodes.count - $0.nodes.held, absent: $0.absent.count, hits: $0.hits, misses: $0.misses) }
    }
}
