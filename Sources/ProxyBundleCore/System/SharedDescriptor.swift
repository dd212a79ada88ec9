#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A descriptor several holders share, closed when the last lets it go: the node table keeps
/// the descriptors of open and removed files so, and an operation that reads or changes the
/// file through one holds it outside the table's lock (a release meanwhile cannot close it, so
/// its number never comes to mean another file while in use). It is let go only where no lock
/// forbids a system call (see `LockRank.forbidsSystemCalls`): the node table collects what its
/// changes let go and drops it once unlocked.
final class SharedDescriptor: Sendable {
    let fd: Int32
    /// Where the close goes when `closesLater` is set (see `Closer`).
    private let closer: Closer
    /// Whether the close may free a removed file's blocks, and so goes to `closer`.
    private let closesLater: Atomic<Bool>

    init(_ fd: Int32, closer: Closer, closesLater: Bool = false) {
        self.fd = fd
        self.closer = closer
        self.closesLater = Atomic(closesLater)
    }

    /// The file's last name is gone: its last close goes to the closing thread.
    func closeLater() { closesLater.store(true, ordering: .relaxed) }

    deinit {
        LockOrder.willCallSystem("letting go of a shared descriptor")
        if closesLater.load(ordering: .relaxed) { closer.close(fd) } else { Sys.close(fd) }
    }
}
