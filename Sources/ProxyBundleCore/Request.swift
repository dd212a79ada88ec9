#if canImport(Glibc)
import Glibc
#endif

/// One request to the overlay, passed to every operation that reads placements: the stack
/// view it reads (pinned when the request is made, kept to its end), who asks, whether the
/// caller gave up waiting, and what its changes leave for the kernel to forget. The FUSE
/// server makes one per kernel request; everything else that calls the overlay (the control
/// files, the read-ahead, tools, tests) makes its own with `Request(overlay)`. Nothing about a
/// request travels on the thread: a swap of the layers waits for no request, and an operation
/// reads only the view its request holds (see `StackView`). A change of the substitution runs
/// in `changing`, whose `Change` every function that changes it takes. Used by one thread at a
/// time.
public final class Request {
    /// The view this request reads placements in.
    let view: StackView
    /// `Overlay.changes`, which `changing` holds.
    private let changes: ReadWriteLock
    /// Who asks, without supplementary groups: the owner of what it makes, and its umask.
    public let owner: Requester
    /// What only the request's source can tell (nil: a request of the daemon's own).
    private let origin: (any RequestOrigin)?
    /// The caller's supplementary groups, once read.
    private var groups: [gid_t]?
    /// Whether a long copy may stop with EINTR now (see `whileInterruptible`).
    private var interruptible = false
    /// What changes made in this request leave for the kernel to forget (see `KernelForgets`).
    private var forgets: KernelForgets?

    /// A request on the view current now, made by `owner` (root when not told), with what
    /// only `origin` can tell (groups, interruption).
    public init(_ overlay: Overlay, owner: Requester = Requester(uid: 0, gid: 0, groups: []),
                origin: (any RequestOrigin)? = nil) {
        view = overlay.views.current
        changes = overlay.changes
        self.owner = owner
        self.origin = origin
        groups = origin == nil ? owner.groups : nil
    }

    /// Who asks, with supplementary groups (for a permission check): read from the origin the
    /// first time they are needed, since that takes system calls.
    public var caller: Requester {
        if groups == nil { groups = origin?.groups() ?? [] }
        var caller = owner
        caller.groups = groups ?? []
        return caller
    }

    /// Runs `body` with long copies asking whether the caller gave up (the kernel sent
    /// FUSE_INTERRUPT); they then stop with EINTR, removing what they made.
    public func whileInterruptible<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        let before = interruptible
        interruptible = true
        defer { interruptible = before }
        return try body()
    }

    /// Runs `body`, which changes the substitution, holding `Overlay.changes` shared: the one
    /// place that takes it so. Every function that changes the substitution takes the `Change`
    /// (copy-up, make, remove, rename, setattr, xattrs), so none runs outside.
    func changing<T>(file: StaticString = #fileID, line: UInt = #line,
                     _ body: (borrowing Change) throws(Errno) -> T) throws(Errno) -> T {
        changes.lockShared(file: file, line: line)
        defer { changes.unlockShared() }
        return try body(Change(isAlone: false))
    }

    /// Runs `body` holding `Overlay.changes` alone: a rename that materializes a directory
    /// (see Materialize.swift), which no other change may run beside.
    func changingAlone<T>(file: StaticString = #fileID, line: UInt = #line,
                          _ body: (borrowing Change) throws(Errno) -> T) throws(Errno) -> T {
        try changes.withExclusive(file: file, line: line) { () throws(Errno) -> T in try body(Change(isAlone: true)) }
    }

    /// Whether the caller gave up waiting, while that stops this request.
    var isInterrupted: Bool { interruptible && origin?.isInterrupted == true }

    /// EINTR when the caller gave up waiting, while that stops this request.
    func checkInterrupted() throws(Errno) {
        if isInterrupted { throw Errno(EINTR) }
    }

    /// Keeps what a change found for the kernel to forget, until the request's reply.
    func keep(forgetting nodes: [NodeID], names: [(parent: NodeID, name: [UInt8])]) {
        if forgets == nil { forgets = KernelForgets() }
        forgets?.nodes += nodes
        forgets?.names += names
    }

    /// What this request's changes left for the kernel to forget, now taken away; nil when
    /// nothing.
    public func takeKernelForgets() -> KernelForgets? {
        defer { forgets = nil }
        return forgets
    }

    /// The layers of this request's view, top first.
    public var layers: LayerStack { view.layers }

    /// The descriptors of directories recently looked in, of this request's view.
    var directories: DirectoryCache { view.directories }

    /// The substitution's layer, the only one written; EROFS for a stack without one.
    var substitution: Layer {
        get throws(Errno) {
            guard let top = view.layers.substitution else { throw Errno.readOnly }
            return top.layer
        }
    }

    /// Whether changes go to the substitution (false: they answer EROFS).
    public var isWritable: Bool { view.layers.substitution?.isWritable ?? false }
}

extension Request {
    /// The layer that serves an entry placed so (its top layer), in this request's view.
    func layer(serving placement: Placement) -> Layer {
        layers[Int(placement.top)]
    }

    /// The attributes of the entry at `path` placed so, as the mount shows them.
    func attributes(at path: LayerPath, _ placement: Placement) throws(Errno) -> stat {
        shown(try layer(serving: placement).attributes(path), placement)
    }

    /// The copy-up work directory, made (again) if it is missing: an updater may have removed
    /// it (`rsync --delete`) or moved it.
    func workspace(warn: (String) -> Void) throws(Errno) -> Workspace {
        try checkWritable(warn: warn)
        guard let top = layers.substitution else { throw Errno.readOnly }
        return try top.workspace()
    }

    /// EROFS for a read-only overlay, one without a substitution, and while the substitution
    /// directory is removed (see `Substitution.checkWritable`, which tells `warn` once).
    func checkWritable(warn: (String) -> Void) throws(Errno) {
        guard let top = layers.substitution else { throw Errno.readOnly }
        try top.checkWritable(warn: warn)
    }
}

/// A change of the substitution in progress: made only by `Request.changing` (or
/// `changingAlone`) for the length of its body, while `Overlay.changes` is held, and taken by
/// every function that changes the substitution. It cannot be copied or kept.
struct Change: ~Copyable {
    /// Whether `Overlay.changes` is held alone (no other change runs), as materializing a
    /// directory needs.
    let isAlone: Bool

    fileprivate init(isAlone: Bool) { self.isAlone = isAlone }
}

/// Where a request came from, for what only its source can tell.
public protocol RequestOrigin {
    /// The caller's supplementary groups (reading them may take system calls).
    func groups() -> [gid_t]
    /// Whether the caller gave up waiting for the answer.
    var isInterrupted: Bool { get }
}

/// What the kernel may keep of other spellings after a change through the mount, where names
/// fold (see `NodeTable.forgetOtherSpellings`): directory nodes whose attributes and listings
/// are outdated, and names (a directory and a spelling) that now lead elsewhere or nowhere, or
/// exist where they were missing. Found with the change's locks held, told to the kernel by
/// the FUSE server before the reply, with no lock held.
public struct KernelForgets {
    public var nodes: [NodeID] = []
    public var names: [(parent: NodeID, name: [UInt8])] = []
}
