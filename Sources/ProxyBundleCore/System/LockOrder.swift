#if canImport(Glibc)
import Glibc
#endif

/// Checks the lock order (see `LockRank`) as the kernel's lockdep does: each thread keeps the
/// ranks it holds, and every acquisition, system call and kernel notification is checked
/// against them. A violation prints both locks and where each was taken, then stops the
/// process. Debug builds only (the test suite runs one): in release builds every check
/// compiles to nothing.
public enum LockOrder {
    /// One lock a thread holds, and where it was taken.
    struct Hold {
        var rank: LockRank
        var file: StaticString
        var line: UInt
    }

    /// What one thread holds; `collected` is non-nil while `violations(in:)` runs.
    final class Thread {
        var holds: [Hold] = []
        var collected: [String]?
    }

#if DEBUG
    /// Each thread's `Thread`, released when the thread ends.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            if let raw { Unmanaged<Thread>.fromOpaque(raw).release() }
        }
        return key
    }()

    private static var current: Thread {
        if let raw = pthread_getspecific(key) { return Unmanaged<Thread>.fromOpaque(raw).takeUnretainedValue() }
        let thread = Thread()
        pthread_setspecific(key, Unmanaged.passRetained(thread).toOpaque())
        return thread
    }
#endif

    /// Before this thread waits for a lock of rank `rank`: no lock of the same or a higher rank,
    /// and no leaf, may be held.
    @inline(__always)
    static func willTake(_ rank: LockRank, file: StaticString, line: UInt) {
#if DEBUG
        let thread = current
        if let held = thread.holds.last(where: { $0.rank.rawValue >= rank.rawValue || $0.rank.isLeaf }) {
            let why = held.rank == rank ? "again (no lock is re-entrant)"
                : held.rank.isLeaf ? "under a leaf" : "under a lock of a higher rank"
            violated(thread, "taking `\(rank)` (rank \(rank.rawValue)) at \(file):\(line) \(why): "
                + "this thread holds `\(held.rank)` (rank \(held.rank.rawValue)), taken at \(held.file):\(held.line)")
        }
        thread.holds.append(Hold(rank: rank, file: file, line: line))
#endif
    }

    /// After this thread let go of a lock of rank `rank` (the last one taken of that rank).
    @inline(__always)
    static func didRelease(_ rank: LockRank) {
#if DEBUG
        let thread = current
        if let index = thread.holds.lastIndex(where: { $0.rank == rank }) { thread.holds.remove(at: index) }
#endif
    }

    /// Before a system call: none of the locks held forbids one (see `LockRank.forbidsSystemCalls`).
    @inline(__always)
    public static func willCallSystem(_ what: StaticString = "a system call", file: StaticString = #fileID,
                                      line: UInt = #line) {
#if DEBUG
        let thread = current
        if let held = thread.holds.last(where: { $0.rank.forbidsSystemCalls }) {
            violated(thread, "\(what) at \(file):\(line) under `\(held.rank)` (rank \(held.rank.rawValue)), "
                + "taken at \(held.file):\(held.line)")
        }
#endif
    }

    /// Before the kernel is notified or replied to: no lock is held but `invalidations`.
    @inline(__always)
    public static func willNotifyKernel(file: StaticString = #fileID, line: UInt = #line) {
#if DEBUG
        let thread = current
        if let held = thread.holds.last(where: { !$0.rank.allowsNotifying }) {
            violated(thread, "notifying the kernel at \(file):\(line) under `\(held.rank)` (rank \(held.rank.rawValue)), "
                + "taken at \(held.file):\(held.line)")
        }
#endif
    }

    /// Whether violations are checked (false in release builds).
    public static var checks: Bool {
#if DEBUG
        true
#else
        false
#endif
    }

    /// Runs `body` on this thread with each violation recorded instead of stopping the process
    /// (the acquisitions go ahead), and returns what it recorded: a test of the checker itself.
    public static func violations(in body: () -> Void) -> [String] {
#if DEBUG
        let thread = current
        let outer = thread.collected
        thread.collected = []
        body()
        let found = thread.collected ?? []
        thread.collected = outer
        return found
#else
        body()
        return []
#endif
    }

#if DEBUG
    private static func violated(_ thread: Thread, _ message: String) {
        if thread.collected != nil {
            thread.collected?.append(message)
            return
        }
        fatalError("lock order violated: \(message)")
    }
#endif
}
