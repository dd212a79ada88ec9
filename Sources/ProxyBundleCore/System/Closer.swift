#if canImport(Glibc)
import Glibc
#endif

/// Closes the descriptors of removed files on a thread of its own (started on first use). The
/// last close of a removed file frees its blocks, and on a file system mounted `discard`
/// (as many virtual machines' disks are) that is one discard per extent: 5–20 s for a 100 MB
/// file of 25,600 extents (xfstests' generic/610) on a busy machine. A request thread doing
/// that held up the daemon's shutdown after `umount`, and with it the substitution's writer
/// lock, so the next mount of it waited; the blocks are the file system's business, not a
/// change anyone can see, so nothing waits for them now.
final class Closer: Sendable {
    private struct State {
        var pending: [Int32] = []
        var started = false
    }
    private let state = Locked(State(), rank: .closer)
    /// Signalled when a descriptor is queued.
    private let queued = Condition()

    init() {}

    /// Closes `fd` soon, on the closing thread (at once if that thread cannot be started).
    func close(_ fd: Int32) {
        let isQueued = state.withLock { s -> Bool in
            if !s.started { s.started = start() }
            if s.started { s.pending.append(fd) }
            return s.started
        }
        queued.signal()
        if !isQueued { Sys.close(fd) }
    }

    /// The thread keeps this object for the life of the process.
    private func start() -> Bool {
        DetachedThread.start { self.run() }
    }

    private func run() -> Never {
        while true {
            let taken = state.withLock(when: { !$0.pending.isEmpty }, on: queued) { s -> [Int32] in
                defer { s.pending.removeAll() }
                return s.pending
            }
            taken.forEach(Sys.close)
        }
    }
}
