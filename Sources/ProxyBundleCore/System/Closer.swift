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
final class Closer: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var pending: [Int32] = []
    private var started = false

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
    }

    /// Closes `fd` soon, on the closing thread (at once if that thread cannot be started).
    func close(_ fd: Int32) {
        pthread_mutex_lock(&mutex)
        if !started { started = start() }
        let queued = started
        if queued { pending.append(fd) }
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
        if !queued { Sys.close(fd) }
    }

    /// The thread keeps this object for the life of the process.
    private func start() -> Bool {
        DetachedThread.start { self.run() }
    }

    private func run() -> Never {
        while true {
            pthread_mutex_lock(&mutex)
            while pending.isEmpty { pthread_cond_wait(&condition, &mutex) }
            let taken = pending
            pending.removeAll()
            pthread_mutex_unlock(&mutex)
            taken.forEach(Sys.close)
        }
    }
}
