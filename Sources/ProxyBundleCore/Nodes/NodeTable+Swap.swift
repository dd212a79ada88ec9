/// A swap of the patches that keeps what it does not change (see `Overlay.replacePatches`): the
/// table starts a new generation, the swap tells from the patches' indexes which cached names
/// now lead elsewhere, and every other node is renumbered into the new stack's layers and stays
/// fresh.
extension NodeTable {
    /// What the table cached when a swap began: which directory nodes have names cached, and
    /// where they were placed (their names are asked as the swap gets to them, see
    /// `swapChildren`).
    struct SwapSnapshot {
        /// The directory nodes with named children or names remembered missing.
        var directories = Set<NodeID>()
        /// The first node ID not cached: nodes from it on were made while the swap ran.
        var firstNew: NodeID = 0
        /// The placements of the directory nodes.
        var placements: [NodeID: Placement] = [:]
        /// The generation the cached nodes were fresh in, and the one the swap makes.
        var before: UInt32 = 0
        var after: UInt32 = 0
    }

    /// What a swap decided for one node.
    enum SwapDecision {
        /// Resolves as before, placed so in the new stack.
        case placed(Placement)
        /// Leads elsewhere now: resolved again, and the kernel told.
        case changed
    }

    /// Begins a swap: a new generation, so that no request in flight stores what it resolves
    /// in the old stack from now on (their own view still finds the nodes fresh), and what is
    /// cached, for the swap to look at outside the lock.
    func beginSwap() -> SwapSnapshot {
        locked { s in
            var cached = SwapSnapshot()
            cached.before = s.generation
            s.generation = s.generation == UInt32.max ? 1 : s.generation + 1
            cached.after = s.generation
            var parent: NodeID = 0
            s.nodes.forEach { id, node in
                guard id != rootNodeID, node.parent != NodeTable.detachedParent else { return }
                // a directory's nodes are mostly made one after the other
                if node.parent != parent {
                    parent = node.parent
                    cached.directories.insert(parent)
                }
                if node.placement.isDirectory { cached.placements[id] = node.placement }
            }
            cached.firstNew = s.nextID
            for key in s.aliasNames.keys { cached.directories.insert(key.parent) }
            for key in s.absent { cached.directories.insert(key.parent) }
            return cached
        }
    }

    /// For each of `names` in directory node `dir`: the node it leads to if that was made
    /// before `firstNew` (cached when the swap began), and whether it is remembered missing.
    func swapChildren(of dir: NodeID, _ names: [[UInt8]], before firstNew: NodeID) -> [(child: NodeID?, absent: Bool)] {
        locked { s in
            names.map { name in
                let key = ChildKey(parent: dir, name: name)
                return (s.child(key).flatMap { $0 < firstNew ? $0 : nil }, s.absent.contains(key))
            }
        }
    }

    /// Ends a swap begun as `cached`: the nodes `decided` are placed or changed so, those
    /// beneath `changedTrees` (directory nodes) are stale, every other node cached then and
    /// fresh in the old generation is renumbered by `renumber` (nil: it speaks of a layer the
    /// new stack lacks, and is resolved again) and fresh in the new one; nodes made during the
    /// swap are resolved again. Names `changedNames` names (children and names remembered
    /// missing) go. Returns what the kernel must forget: those names, the directories whose
    /// listing changed (`listings`), and what lies beneath the changed trees.
    func finishSwap(_ cached: SwapSnapshot, decided: [NodeID: SwapDecision], changedNames: [ChildKey], listings: Set<NodeID>,
                    changedTrees: Set<NodeID>, root: Placement, renumber: (Placement) -> Placement?) -> Invalidation {
        locked { s in
            s.version &+= 1
            s.nodes[rootNodeID]?.placement = root
            var entries = Set(changedNames)
            var nodes = listings
            for key in changedNames { s.absent.remove(key) }
            // one pass: a node cached and fresh before is renumbered (or placed as decided, or
            // resolved again); everything else is stale (it was, or was resolved while the
            // swap ran: the kernel looks that one up again). A stale node keeps the generation
            // it was resolved in, which its placement is numbered in: where its name now leads
            // to another file, the file the kernel holds is found there (`Overlay.openWhereItWas`);
            // so do the nodes beneath the trees that changed
            let beneath = changedTrees.isEmpty ? (outliving: [], inside: [])
                : NodeTable.markStale(beneath: changedTrees, in: &s, inNewGeneration: true)
            var made: [ChildKey] = []
            var changed: [NodeID] = []
            s.nodes.updateWithIDs(except: rootNodeID) { id, node in
                guard node.freshIn == cached.before, node.parent != NodeTable.detachedParent,
                      !beneath.inside.contains(node.parent) else { return }
                guard id < cached.firstNew else {
                    made.append(ChildKey(parent: node.parent, name: node.name.bytes))
                    return
                }
                let placement: Placement?
                switch decided[id] {
                case .placed(let decided)?: placement = decided
                case .changed?:
                    changed.append(id)
                    placement = nil
                case nil: placement = renumber(node.placement)
                }
                guard let placement else { return }
                node.placement = placement
                node.freshIn = cached.after
            }
            entries.formUnion(made)
            for id in changed {
                if let node = s.nodes[id], NodeTable.outlivesEntry(id, node, in: s) { nodes.insert(id) }
            }
            if !changedTrees.isEmpty {
                nodes.formUnion(beneath.outliving)
                for key in s.absent.removeAll(inDirectories: beneath.inside.contains) { entries.insert(key) }
                for key in s.childKeys(in: beneath.inside.contains) { entries.insert(key) }
            }
            var result = Invalidation()
            result.entries = entries.map { ($0.parent, $0.name) }
            result.nodes = Array(nodes)
            return result
        }
    }

    /// The placements of nodes `ids` fresh in the current generation (nil for the others).
    func freshPlacements<S: Sequence>(of ids: S) -> [NodeID: Placement?] where S.Element == NodeID {
        locked { s in
            var result: [NodeID: Placement?] = [:]
            for id in ids {
                guard let node = s.nodes[id] else { result[id] = .some(nil); continue }
                result[id] = s.isFresh(id, node, in: s.generation) ? node.placement : nil
            }
            return result
        }
    }
}
