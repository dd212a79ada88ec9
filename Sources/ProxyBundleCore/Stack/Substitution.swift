#if canImport(Glibc)
import Glibc
#endif

/// The writable top of a stack, the only layer ever written, and what belongs to it beside its
/// entries: the copy-up work area, the inode numbers copied-up entries keep showing
/// (`Origins`), whether changes are accepted now (a remount changes it), and the warning given
/// once when its directory was removed behind the daemon's back. A stack may have none
/// (`--no-substitution`, and the resources library's view of layers merged in process): then
/// nothing is written anywhere and every change answers EROFS. The lock that keeps a second
/// writable mount off the same directory is the command line's (`WriterLock`).
public final class Substitution: Sendable {
    public let layer: Layer

    private struct State {
        /// The copy-up work directory once made.
        var work: Workspace?
        var origins = Origins()
        var writable: Bool
        var warnedOfRemoval = false
    }

    private let state: Locked<State>

    /// The substitution `layer`, taking changes when `writable`. A writable one starts without
    /// what a crash left of the work directory (it is made again when first needed).
    public init(_ layer: Layer, writable: Bool) {
        self.layer = layer
        if writable { Workspace.remove(from: layer) }
        state = Locked(State(writable: writable), rank: .substitution)
    }

    /// Whether changes go here now (false: they answer EROFS).
    public var isWritable: Bool { state.withLock { $0.writable } }

    /// Takes changes, or stops taking them (a remount). Made writable for the first time, it
    /// starts without what a crash left of the work directory, as a writable mount does.
    func setWritable(_ writable: Bool) {
        let cleans = state.withLock { s -> Bool in
            defer { s.writable = writable }
            return writable && !s.writable && s.work == nil
        }
        if cleans { Workspace.remove(from: layer) }
    }

    /// EROFS while read-only, and while the directory is removed (reads go on from the layers
    /// below; the first refusal is told to `warn`). Once a directory is back at the
    /// substitution's path, an invalidation installs it.
    func checkWritable(warn: (String) -> Void) throws(Errno) {
        guard isWritable else { throw Errno.readOnly }
        guard let st = try? Sys.fstat(layer.rootFD), st.st_nlink == 0 else { return }
        let first = state.withLock { s -> Bool in
            defer { s.warnedOfRemoval = true }
            return !s.warnedOfRemoval
        }
        if first {
            warn("the substitution directory \(layer.path) was removed: changes answer EROFS "
                 + "until a directory is back at that path and .invalidate is written")
        }
        throw Errno.readOnly
    }

    /// The copy-up work directory, made (again) if it is missing: an updater may have removed
    /// it (`rsync --delete`) or moved it.
    func workspace() throws(Errno) -> Workspace {
        if let current = state.withLock({ $0.work }), current.isInPlace(in: layer) { return current }
        let made = try Workspace(in: layer)
        state.withLock { $0.work = made }
        return made
    }

    /// Leaves the directory with nothing of the daemon's (a clean unmount, or after another
    /// substitution took its place).
    func close() {
        let work = state.withLock { s -> Workspace? in
            defer { s.work = nil }
            return s.work
        }
        if work != nil { Workspace.remove(from: layer) }
    }

    /// The number copy `number` (a substitution inode as numbered) shows instead, if any.
    func origin(of number: UInt64) -> UInt64? {
        state.withLock { $0.origins.number(for: number) }
    }

    /// The inode numbers kept for copies, as they are now.
    var origins: Origins { state.withLock { $0.origins } }

    func changeOrigins(_ change: (inout Origins) -> Void) {
        state.withLock { change(&$0.origins) }
    }
}
