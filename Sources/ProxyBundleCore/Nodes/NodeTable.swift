#if canImport(Glibc)
import Glibc
#endif

/// Identifies a node to the kernel. Allocated by the overlay, monotonically, never reused: a
/// node keeps its ID for as long as its file has a name, also after the kernel forgot it, so a
/// file handle (the node ID) keeps finding it (see `forget`).
public typealias NodeID = UInt64

public let rootNodeID: NodeID = 1

/// The nodes the kernel knows about: each has a parent and a name, so its path is computed
/// from the chain, and a lookup count the kernel decrements with FORGET. The table is also the
/// daemon's lookup cache: a fresh node's placement answers a lookup of its name without
/// resolving it again, and names found missing are remembered as absent (see
/// NodeTable+Cache.swift).
///
/// The folder `Nodes/` owns nodes and names: the table and its pages, a node's name, the
/// index from names to nodes, and what the daemon knows of each directory's names (present,
/// by layer; absent).
final class NodeTable: Sendable {
    /// Kept small (64 bytes, a short name included; every cached name has one): what few
    /// nodes need lives in `State.extras`. The fields are in the order that packs them.
    struct Node {
        /// `detachedParent` once the node's name was removed
        var parent: NodeID
        /// Which file a non-directory is (its reported inode number; 0 when unknown): after an
        /// invalidation, a name that now leads to another file gets a new node.
        var identity: UInt64 = 0
        /// The kernel's references (saturates instead of overflowing: the node then stays).
        var lookups: UInt32
        /// The invalidation generation in which the name was last resolved: the node is fresh
        /// while that is the table's current one (the root always is).
        var freshIn: UInt32 = 0
        var name: NodeName
        var placement: Placement
        /// Whether `State.extras` has an entry for this node.
        var hasExtras = false
        /// The file type (`NodeTable.kind(of:)`): the kernel marks an inode bad when its
        /// type changes, so a name that now leads to another type gets another node.
        var kind: UInt8 = 0

        init(parent: NodeID, name: [UInt8], identity: UInt64 = 0, lookups: UInt32, freshIn: UInt32 = 0,
             placement: Placement, kind: UInt8 = 0) {
            self.parent = parent
            self.name = NodeName(name)
            self.identity = identity
            self.lookups = lookups
            self.freshIn = freshIn
            self.placement = placement
            self.kind = kind
        }

        mutating func addLookup() {
            if lookups < UInt32.max { lookups += 1 }
        }
    }

    /// What only some nodes have.
    struct Extras {
        /// Other names of the same node (hard links made through the mount).
        var aliases: [ChildKey] = []
        /// Descriptors of the node's open files, so an unlinked open file still has attributes.
        var openFiles: [SharedDescriptor] = []
        /// An O_PATH descriptor of the entry whose last name was removed through the mount, so
        /// that its attributes stay readable while the kernel holds the node: `fstat` of a
        /// directory or an O_PATH descriptor opened before, a working directory (the kernel
        /// opens these without telling the daemon). Closed when the kernel forgets the node.
        var removedEntry: SharedDescriptor?
        /// The name a node the kernel holds lost when it came to lead to another file (the
        /// layers changed): where the file the node is may still be opened (see
        /// `Overlay.openFile`).
        var formerName: ChildKey?

        var isEmpty: Bool { aliases.isEmpty && openFiles.isEmpty && removedEntry == nil && formerName == nil }
    }

    struct ChildKey: Hashable {
        var parent: NodeID
        var name: [UInt8]

        /// The name's bytes in one call (the synthesized hash feeds them one at a time).
        func hash(into hasher: inout Hasher) {
            hasher.combine(parent)
            name.withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }

    struct State {
        var nodes = NodeStore()
        var extras: [NodeID: Extras] = [:]
        /// The nodes by their own parent and name (see NodeTable+Names.swift).
        var named = ChildIndex()
        /// Hard links' other names.
        var aliasNames: [ChildKey: NodeID] = [:]
        /// Substitution files with more than one link, by identity: every name of one file is
        /// the same node (one kernel inode, so one page cache and one set of attributes), also
        /// when the names are found separately.
        var linked: [UInt64: NodeID] = [:]
        /// Where names fold: for another spelling of a directory, the node that stands for it
        /// (see NodeTable+Spellings.swift).
        var canonical: [NodeID: NodeID] = [:]
        /// The other way: for a directory node that stands for others, those others, so that a
        /// lookup visits a name's own spellings and not every spelled directory's.
        var spellings: [NodeID: [NodeID]] = [:]
        /// Names resolved as missing (the negative lookup cache).
        var absent = AbsentNames()
        var nextID: NodeID = firstNodeID
        /// Bumped by every change to names or placements, so a lookup that resolved before a
        /// change does not store what it found.
        var version: UInt64 = 0
        var hits: UInt64 = 0
        var misses: UInt64 = 0
        /// Bumped by a full invalidation, which makes every node stale at once (never 0, which
        /// marks a node stale).
        var generation: UInt32 = 1
        /// Whether a directory node went since the last look for nodes left without one.
        var mayHaveOrphans = false
        /// Descriptors let go by a change, dropped (and closed, if no one else holds them) once
        /// the table is unlocked (see `NodeTable.locked`).
        var dropped: [SharedDescriptor] = []

        /// Whether `node` was resolved in generation `number` (the root always is).
        func isFresh(_ id: NodeID, _ node: Node, in number: UInt32) -> Bool { id == rootNodeID || node.freshIn == number }

        func extras(of id: NodeID, _ node: Node) -> Extras {
            node.hasExtras ? extras[id] ?? Extras() : Extras()
        }

        /// Changes the extras of an existing node.
        mutating func changeExtras(of id: NodeID, _ change: (inout Extras) -> Void) {
            guard var node = nodes[id] else { return }
            var value = extras(of: id, node)
            change(&value)
            node.hasExtras = !value.isEmpty
            extras[id] = node.hasExtras ? value : nil
            nodes[id] = node
        }
    }

    /// Only through `locked`.
    private let state: Locked<State>
    /// Whether names fold (`-o casefold`, see NodeTable+Spellings.swift).
    let foldsNames: Bool
    /// Where the descriptors of removed files are closed (see `Closer`).
    let closer = Closer()

    /// Runs `body` with the table locked, then lets go of the descriptors it dropped: no system
    /// call is made under the lock.
    @inline(__always)
    func locked<T, E: Error>(file: StaticString = #fileID, line: UInt = #line,
                             _ body: (inout State) throws(E) -> T) throws(E) -> T {
        var dropped: [SharedDescriptor] = []
        defer { dropped.removeAll() }
        return try state.withLock(file: file, line: line) { (s: inout State) throws(E) -> T in
            defer { if !s.dropped.isEmpty { swap(&dropped, &s.dropped) } }
            return try body(&s)
        }
    }

    init(root: Placement, foldsNames: Bool = false) {
        self.foldsNames = foldsNames
        var initial = State()
        initial.named = ChildIndex(folds: foldsNames)
        initial.nodes[rootNodeID] = Node(parent: rootNodeID, name: [], lookups: 1, placement: root)
        state = Locked(initial, rank: .nodeTable)
    }

    /// The generation a request reads the table in (see `StackView`): a node's placement is
    /// fresh for the request only if it was resolved in that same generation, and the root's
    /// placement is the one of that generation. A request that began before a swap of the
    /// layers thus never takes a placement that speaks of the new layers, nor stores one that
    /// speaks of the old.
    struct Generation: Sendable {
        var number: UInt32
        var root: Placement
    }

    /// The current generation.
    var generation: Generation {
        locked { s in
            Generation(number: s.generation, root: s.nodes[rootNodeID]?.placement ?? Placement(top: 0, bottom: 0, isDirectory: true))
        }
    }

    /// Node IDs below this are reserved (the root and the control files).
    static let firstNodeID: NodeID = 16

    /// Where a node is: its path in the layers, its placement and its parent.
    struct Location {
        var path: LayerPath
        var placement: Placement
        var parent: NodeID
        /// Whether the node and all its ancestors were resolved since the last invalidation.
        var isFresh: Bool = true
        /// The node's file type (see `Node.kind`; 0 for the root).
        var kind: UInt8 = 0
        /// The generation the node itself was last resolved in (0: stale since), and which
        /// file it is (see `Node.identity`).
        var resolvedIn: UInt32 = 0
        var identity: UInt64 = 0
    }

    /// The file type bits of a mode, as a small number.
    static func kind(of mode: mode_t) -> UInt8 { UInt8(truncatingIfNeeded: (mode & S_IFMT) >> 12) }

    /// The node's location (also of one the kernel forgot: its ancestors, which a node opened
    /// by a file handle may have); ESTALE for a node not known or whose name was removed.
    /// The node's location, or for a node whose name was taken away (as `locate` does when
    /// the name now leads to another file), where it was (see `Extras.formerName`): its
    /// placement and identity as they were, never fresh.
    func lastKnownLocation(of id: NodeID, in generation: Generation) -> Location? {
        locked { s -> Location? in
            if let location = try? NodeTable.location(of: id, in: s, generation) { return location }
            guard let node = s.nodes[id], node.parent == NodeTable.detachedParent,
                  let former = s.extras(of: id, node).formerName,
                  let parent = try? NodeTable.location(of: former.parent, in: s, generation) else { return nil }
            return Location(path: parent.path.appending(former.name), placement: node.placement, parent: former.parent,
                            isFresh: false, kind: node.kind, resolvedIn: node.freshIn, identity: node.identity)
        }
    }

    /// Freshness and the root's placement are as in `generation`.
    func location(of id: NodeID, in generation: Generation) throws(Errno) -> Location {
        try locked { (s: inout State) throws(Errno) -> Location in try NodeTable.location(of: id, in: s, generation) }
    }

    static func location(of id: NodeID, in s: State, _ generation: Generation) throws(Errno) -> Location {
        guard let node = s.nodes[id] else { throw Errno.stale }
        if id == rootNodeID { return Location(path: .root, placement: generation.root, parent: rootNodeID) }
        do {
            return try location(of: id, node, parent: node.parent, name: node.name, in: s, generation.number)
        } catch {
            // a hard link's other names: the kernel keeps the directories of the names it
            // holds, not necessarily of this one
            guard node.hasExtras else { throw error }
            for alias in s.extras(of: id, node).aliases {
                if let found = try? location(of: id, node, parent: alias.parent, name: NodeName(alias.name), in: s,
                                            generation.number) {
                    return found
                }
            }
            throw error
        }
    }

    private static func location(of id: NodeID, _ node: Node, parent: NodeID, name: NodeName,
                                 in s: State, _ generation: UInt32) throws(Errno) -> Location {
        var ancestors: [NodeName] = []
        var length = name.count
        var fresh = s.isFresh(id, node, in: generation)
        var current = parent
        while current != rootNodeID {
            guard let ancestor = s.nodes[current] else { throw Errno.stale }
            ancestors.append(ancestor.name)
            length += ancestor.name.count + 1
            fresh = fresh && s.isFresh(current, ancestor, in: generation)
            current = ancestor.parent
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        for directory in ancestors.reversed() {
            directory.withBytes { bytes.append(contentsOf: $0) }
            bytes.append(UInt8(ascii: "/"))
        }
        name.withBytes { bytes.append(contentsOf: $0) }
        return Location(path: LayerPath(bytes: bytes), placement: node.placement, parent: parent, isFresh: fresh,
                        kind: node.kind, resolvedIn: node.freshIn, identity: node.identity)
    }

    /// Records one more kernel reference to the child `name` of `parent`, resolved just now to
    /// `placement` and (for a non-directory) the file `identity`, and returns its node.
    /// `resolvedAt` is the table's `version` when the resolution began: if names changed since
    /// (an invalidation among them), an existing node keeps its placement and a new one is
    /// made stale. Pass nil right after a change made by the daemon. So is a node resolved in
    /// an older `generation` than the table's (the layers were swapped meanwhile).
    /// A name that now leads to another file, or to another kind of entry, gets a new node.
    /// `linkCount` is the file's number of links: a substitution file with more than one is
    /// given the node its other names already have.
    func remember(parent: NodeID, name: [UInt8], placement: Placement, kind: UInt8, identity: UInt64, linkCount: Int = 1,
                  resolvedAt: UInt64?, in generation: Generation) -> NodeID {
        locked { s in
            let key = ChildKey(parent: parent, name: name)
            s.absent.remove(key)
            if resolvedAt == nil { s.version &+= 1 }
            let current = (resolvedAt == nil || resolvedAt == s.version) && generation.number == s.generation
            let shared = current && placement.inSubstitution && !placement.isDirectory && linkCount > 1 && identity != 0
            if shared, let id = NodeTable.linkedNode(identity, kind: kind, for: key, in: &s) { return id }
            let hash = s.named.hash(parent, name)
            if let id = s.child(key, hash: hash), var node = s.nodes[id] {
                let same = node.kind == kind && node.placement.isDirectory == placement.isDirectory
                    && (placement.isDirectory || node.identity == identity || node.identity == 0 || !current)
                if same {
                    node.addLookup()
                    if current {
                        node.placement = placement
                        node.identity = identity
                        node.freshIn = s.generation
                    }
                    s.nodes[id] = node
                    return id
                }
                NodeTable.unlink(key, from: &s)
            }
            let folded = foldsNames ? NodeTable.foldedKey(parent: parent, name: name, in: s) : nil
            let standing = folded.flatMap { NodeTable.spelled($0, kind: kind, isDirectory: placement.isDirectory, in: s) }
            if let standing, !placement.isDirectory, var node = s.nodes[standing] {
                // another spelling of a non-directory: one more name of its node
                if s.child(key) != standing {
                    NodeTable.attach(key, to: standing, node, in: &s)
                    node = s.nodes[standing] ?? node
                }
                node.addLookup()
                if current {
                    node.placement = placement
                    node.freshIn = s.generation
                }
                s.nodes[standing] = node
                return standing
            }
            let id = s.nextID
            s.nextID += 1
            // resolved before names changed (an invalidation among them): used, but resolved again
            // before it is trusted. Resolved in a generation the layers were swapped out of since,
            // it keeps that generation: stale for every later request, and found where it was
            // by a fallback after the swap (see `Overlay.openWhereItWas`)
            let resolvedIn = current ? s.generation : generation.number != s.generation ? generation.number : 0
            s.nodes[id] = Node(parent: parent, name: name, identity: identity, lookups: 1, freshIn: resolvedIn,
                               placement: placement, kind: kind)
            s.indexNew(id, hash: hash)
            if shared { s.linked[identity] = id }
            NodeTable.recordSpelling(id, standing: standing, in: &s)
            return id
        }
    }

    /// The node of another name of substitution file `identity`, now also named `key` (one
    /// more kernel reference), if the table has one.
    private static func linkedNode(_ identity: UInt64, kind: UInt8, for key: ChildKey, in s: inout State) -> NodeID? {
        guard let id = s.linked[identity] else { return nil }
        guard var node = s.nodes[id], node.identity == identity, node.kind == kind, node.placement.inSubstitution,
              !node.placement.isDirectory else {
            s.linked[identity] = nil
            return nil
        }
        if s.child(key) != id {
            NodeTable.attach(key, to: id, node, in: &s)
            node = s.nodes[id] ?? node
        }
        node.addLookup()
        node.freshIn = s.generation
        s.nodes[id] = node
        return id
    }

    /// `key` now leads to node `id` (whose state is `node`), taken from any node it led to: a
    /// node with no name takes it as its own name, another keeps it as one more.
    private static func attach(_ key: ChildKey, to id: NodeID, _ node: Node, in s: inout State) {
        if s.child(key) != nil { NodeTable.unlink(key, from: &s) }
        if node.parent == NodeTable.detachedParent {
            s.rename(id, to: key)
        } else {
            s.changeExtras(of: id) { $0.aliases.append(key) }
        }
        s.setChild(key, id)
    }

    /// Takes `key` away from its node (the node lives on, unreachable by that name, while the
    /// kernel holds it).
    static func unlink(_ key: ChildKey, from s: inout State) {
        guard let id = s.removeChild(key), let node = s.nodes[id] else { return }
        defer { removeIfGone(id, in: &s) }
        var extras = s.extras(of: id, node)
        if let index = extras.aliases.firstIndex(of: key) {
            extras.aliases.remove(at: index)
        } else if let next = extras.aliases.popLast() {
            // another hard link carries the node on
            _ = s.removeChild(next)
            s.rename(id, to: next)
            s.setChild(next, id)
        } else {
            s.rename(id, to: ChildKey(parent: NodeTable.detachedParent, name: NodeTable.deletedName))
            if node.lookups > 0 { extras.formerName = key }
        }
        if node.hasExtras || extras.formerName != nil { s.changeExtras(of: id) { $0 = extras } }
    }

    static let deletedName = Array("(deleted)".utf8)

    /// Drops `count` kernel references. A node with none left stays, with its name, parent
    /// and placement, as long as it has a name: the kernel may ask for it again by node ID
    /// (LOOKUP of "." for a file handle it decodes), and a lookup of its name gets it back
    /// with the same ID. A node without a name (removed) goes.
    func forget(_ id: NodeID, count: UInt64) {
        guard id != rootNodeID else { return }
        locked { s in
            guard var node = s.nodes[id], node.lookups > 0 else { return }
            if node.lookups == UInt32.max { return }  // saturated: kept for good
            node.lookups = UInt64(node.lookups) > count ? node.lookups - UInt32(count) : 0
            s.nodes[id] = node
            NodeTable.removeIfGone(id, in: &s)
        }
    }

    /// Removes node `id` if the kernel forgot it and it has no name left (its descriptors are
    /// dropped once the table is unlocked).
    static func removeIfGone(_ id: NodeID, in s: inout State) {
        guard let node = s.nodes[id], node.lookups == 0, node.parent == NodeTable.detachedParent else { return }
        remove(id, node, in: &s)
    }

    /// Removes node `id` and everything that leads to it.
    private static func remove(_ id: NodeID, _ node: Node, in s: inout State) {
        s.unindex(id, node)
        let extras = s.extras(of: id, node)
        s.dropped += extras.openFiles
        if let entry = extras.removedEntry { s.dropped.append(entry) }
        for alias in extras.aliases where s.aliasNames[alias] == id { s.aliasNames[alias] = nil }
        s.nodes[id] = nil
        if node.hasExtras { s.extras[id] = nil }
        if !s.linked.isEmpty, s.linked[node.identity] == id { s.linked[node.identity] = nil }
        forgetSpelling(id, in: &s)
        if node.placement.isDirectory { s.mayHaveOrphans = true }
    }

    /// Removes the nodes the kernel forgot whose directory is gone (removed, its own name
    /// found gone): no handle can reach them. Every invalidation looks, when a directory node
    /// went since the last. Returns how many.
    @discardableResult
    static func removeOrphans(in s: inout State) -> Int {
        guard s.mayHaveOrphans else { return 0 }
        s.mayHaveOrphans = false
        var connected: Set<NodeID> = [rootNodeID]
        var orphans: [NodeID] = []
        s.nodes.forEach { id, node in
            if node.lookups == 0 && !isConnected(id, s, &connected) { orphans.append(id) }
        }
        for id in orphans {
            if let node = s.nodes[id] { remove(id, node, in: &s) }
        }
        return orphans.count
    }

    /// Whether the chain of parents from `id` reaches the root through stored nodes.
    private static func isConnected(_ id: NodeID, _ s: State, _ connected: inout Set<NodeID>) -> Bool {
        var chain: [NodeID] = []
        var current = id
        while !connected.contains(current) {
            guard current != NodeTable.detachedParent, let node = s.nodes[current], chain.count <= s.nodes.count else {
                return false
            }
            chain.append(current)
            current = node.parent
        }
        connected.formUnion(chain)
        return true
    }

    /// One more kernel reference to node `id`, also one the kernel forgot; false for a node
    /// not known or without a name.
    func addLookup(_ id: NodeID) -> Bool {
        locked { s in
            guard var node = s.nodes[id], id == rootNodeID || node.parent != NodeTable.detachedParent else { return false }
            node.addLookup()
            s.nodes[id] = node
            return true
        }
    }

    /// The directory a node's name is in (nil for a node not known).
    func parent(of id: NodeID) -> NodeID? {
        locked { $0.nodes[id]?.parent }
    }

    /// The placement of a node, also of one whose name was removed (it may still be open).
    func placement(of id: NodeID) -> Placement? {
        locked { $0.nodes[id]?.placement }
    }

    /// Changes the placement of a node (after a copy-up); its file identity becomes unknown.
    func update(_ id: NodeID, _ change: (inout Placement) -> Void) {
        locked { s in
            s.version &+= 1
            if var node = s.nodes[id] {
                change(&node.placement)
                node.identity = 0
                s.nodes[id] = node
            }
        }
    }

    /// The name `name` of `parent` no longer refers to its node (after unlink or rmdir); the
    /// node lives on, unreachable by path, until the kernel forgets it. `entry` (an O_PATH
    /// descriptor of what the name led to, which the table then owns) is kept by the node if
    /// that was its last name (see `Extras.removedEntry`), and closed otherwise.
    func detach(parent: NodeID, name: [UInt8], keeping entry: Int32? = nil) {
        let entry = entry.map { SharedDescriptor($0, closer: closer, closesLater: true) }
        locked { s in
            s.version &+= 1
            let key = ChildKey(parent: parent, name: name)
            let id = s.child(key)
            NodeTable.unlink(key, from: &s)
            NodeTable.keep(entry, ofRemoved: id, in: &s)
        }
    }

    /// Gives `entry` to node `id` if `id` has no name left (see `Extras.removedEntry`);
    /// otherwise drops it, to be closed once the table is unlocked.
    private static func keep(_ entry: SharedDescriptor?, ofRemoved id: NodeID?, in s: inout State) {
        guard let entry else { return }
        guard let id, let node = s.nodes[id], node.parent == NodeTable.detachedParent,
              s.extras(of: id, node).removedEntry == nil else { return s.dropped.append(entry) }
        s.changeExtras(of: id) { $0.removedEntry = entry }
    }

    /// A new node without a name (an O_TMPFILE file), with one kernel reference.
    func rememberUnnamed(placement: Placement, kind: UInt8, identity: UInt64) -> NodeID {
        locked { s in
            let id = s.nextID
            s.nextID += 1
            s.nodes[id] = Node(parent: NodeTable.detachedParent, name: NodeTable.deletedName, identity: identity,
                               lookups: 1, freshIn: s.generation, placement: placement, kind: kind)
            return id
        }
    }

    /// Whether node `id` has no name: every name was removed, or it never had one.
    func isUnnamed(_ id: NodeID) -> Bool {
        locked { $0.nodes[id]?.parent == NodeTable.detachedParent }
    }

    /// One more kernel reference to `id`, now also known as `name` in `parent` (a hard link, or
    /// the first name of an O_TMPFILE file).
    func addAlias(_ id: NodeID, parent: NodeID, name: [UInt8]) {
        locked { s in
            let key = ChildKey(parent: parent, name: name)
            s.version &+= 1
            s.absent.remove(key)
            guard let node = s.nodes[id] else { return }
            s.nodes[id]?.addLookup()
            if node.identity != 0 && node.placement.inSubstitution && !node.placement.isDirectory { s.linked[node.identity] = id }
            if s.child(key) != id { NodeTable.attach(key, to: id, node, in: &s) }
        }
    }

    /// `fd`, just opened for node `id`, is the table's until `closed`; false when `id` is not
    /// known (the caller keeps `fd`).
    @discardableResult
    func opened(_ id: NodeID, fd: Int32) -> Bool {
        locked { s in
            guard s.nodes[id] != nil else { return false }
            s.changeExtras(of: id) { $0.openFiles.append(SharedDescriptor(fd, closer: closer)) }
            return true
        }
    }

    /// The kernel closed `fd`, one of node `id`'s open files: it is closed once no operation
    /// uses it, on the closing thread when every name of the node was removed (its blocks may
    /// be freed then: see `Closer`). False when the table does not have it (the caller closes
    /// it).
    func closed(_ id: NodeID, fd: Int32) -> Bool {
        locked { s in
            var found: SharedDescriptor?
            s.changeExtras(of: id) { extras in
                if let index = extras.openFiles.firstIndex(where: { $0.fd == fd }) { found = extras.openFiles.remove(at: index) }
            }
            guard let found else { return false }
            if s.nodes[id]?.parent == NodeTable.detachedParent { found.closeLater() }
            s.dropped.append(found)
            return true
        }
    }

    /// The attributes of one of the node's open files (`detachedOnly`: only if every name of
    /// the node was removed), or of the entry it kept when its last name was removed through
    /// the mount; read through the descriptor held (see `SharedDescriptor`), not under the
    /// table's lock.
    func openFileAttributes(of id: NodeID, detachedOnly: Bool) -> stat? {
        let held = locked { s -> SharedDescriptor? in
            guard let node = s.nodes[id] else { return nil }
            let detached = node.parent == NodeTable.detachedParent
            guard detached || !detachedOnly else { return nil }
            let extras = s.extras(of: id, node)
            return extras.openFiles.first ?? (detached ? extras.removedEntry : nil)
        }
        guard let held else { return nil }
        return withExtendedLifetime(held) { try? Sys.fstat(held.fd) }
    }

    /// Runs `body` with one of the node's open descriptors (or the O_PATH one it kept of its
    /// entry) and its placement when every name of the node was removed; nil when the node has
    /// a name (or no descriptor). The table is not locked meanwhile: the descriptor is held
    /// (see `SharedDescriptor`), so a concurrent release leaves it open until `body` is done.
    func withDetachedOpenFile<T>(of id: NodeID, _ body: (Int32, Placement) throws(Errno) -> T) throws(Errno) -> T? {
        try withOpenFile(of: id, detachedOnly: true, body)
    }

    /// Runs `body` with one of the node's open descriptors (`detachedOnly`: only if every name
    /// of the node was removed), held as for `withDetachedOpenFile`.
    private func withOpenFile<T>(of id: NodeID, detachedOnly: Bool,
                                 _ body: (Int32, Placement) throws(Errno) -> T) throws(Errno) -> T? {
        let found = locked { s -> (SharedDescriptor, Placement)? in
            guard let node = s.nodes[id], !detachedOnly || node.parent == NodeTable.detachedParent else { return nil }
            let extras = s.extras(of: id, node)
            // a removed entry the kernel holds without an open file (a directory, an O_PATH
            // descriptor): the O_PATH descriptor kept of it
            guard let held = extras.openFiles.first ?? (detachedOnly ? extras.removedEntry : nil) else { return nil }
            return (held, node.placement)
        }
        guard let (held, placement) = found else { return nil }
        return try withExtendedLifetime(held) { () throws(Errno) -> T in try body(held.fd, placement) }
    }

    /// The node named `name` in `parent` is now `newName` in `newParent` (after rename).
    /// Whatever the new name referred to before is detached, and keeps `replaced` (as
    /// `detach` does).
    func move(parent: NodeID, name: [UInt8], to newParent: NodeID, _ newName: [UInt8], keeping replaced: Int32? = nil) {
        let replaced = replaced.map { SharedDescriptor($0, closer: closer, closesLater: true) }
        locked { s in
            let old = ChildKey(parent: parent, name: name)
            let new = ChildKey(parent: newParent, name: newName)
            s.version &+= 1
            s.absent.remove(new)
            // renaming a name onto another name of the same file changes nothing (POSIX)
            let target = s.child(new)
            if target != nil && target == s.child(old) { return NodeTable.keep(replaced, ofRemoved: nil, in: &s) }
            if target != nil { NodeTable.unlink(new, from: &s) }
            NodeTable.keep(replaced, ofRemoved: target, in: &s)
            guard let id = s.removeChild(old) else { return }
            NodeTable.rename(id, from: old, to: new, in: &s)
        }
    }

    /// Whether the kernel has a node for `name` of `parent`.
    func hasChild(_ parent: NodeID, _ name: [UInt8]) -> Bool {
        locked { $0.child(ChildKey(parent: parent, name: name)) != nil }
    }

    /// The nodes named `name` in `parent` and `newName` in `newParent` trade names (after
    /// RENAME_EXCHANGE).
    func exchange(parent: NodeID, name: [UInt8], with newParent: NodeID, _ newName: [UInt8]) {
        locked { s in
            let one = ChildKey(parent: parent, name: name)
            let other = ChildKey(parent: newParent, name: newName)
            s.version &+= 1
            let first = s.removeChild(one)
            let second = s.removeChild(other)
            if let first { NodeTable.rename(first, from: one, to: other, in: &s) }
            if let second { NodeTable.rename(second, from: other, to: one, in: &s) }
        }
    }

    /// Gives node `id` the name `new` in place of `old` (its own name or a hard link's).
    private static func rename(_ id: NodeID, from old: ChildKey, to new: ChildKey, in s: inout State) {
        guard let node = s.nodes[id] else { return }
        if let index = s.extras(of: id, node).aliases.firstIndex(of: old) {
            s.changeExtras(of: id) { $0.aliases[index] = new }
        } else {
            s.rename(id, to: new)
        }
        s.setChild(new, id)
    }

    /// The parent of nodes whose name was removed: a path through it fails with ESTALE.
    static let detachedParent: NodeID = 0

    /// The nodes the kernel holds.
    var count: Int { locked { $0.nodes.held } }

    /// The version of names and placements; see `State.version`.
    var version: UInt64 { locked { $0.version } }

    /// The version and the generation's number, read together.
    var versionAndGeneration: (UInt64, UInt32) { locked { ($0.version, $0.generation) } }
}
