#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// A pthread mutex guarding a value. Chosen over `Synchronization.Mutex` because
/// ThreadSanitizer on Linux can see pthread locks. Its rank places it in the lock order (see
/// `LockRank`); it is not re-entrant.
public final class Locked<Value>: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var value: Value
    public let rank: LockRank

    public init(_ value: Value, rank: LockRank) {
        self.value = value
        self.rank = rank
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    @inline(__always)
    public func withLock<T, E: Error>(file: StaticString = #fileID, line: UInt = #line,
                                      _ body: (inout Value) throws(E) -> T) throws(E) -> T {
        LockOrder.willTake(rank, file: file, line: line)
        pthread_mutex_lock(&mutex)
        defer {
            pthread_mutex_unlock(&mutex)
            LockOrder.didRelease(rank)
        }
        return try body(&value)
    }

    /// Runs `body` holding the lock once `ready` is true of the value, waiting on `condition`
    /// (which the value's changers signal) until it is.
    public func withLock<T>(when ready: (Value) -> Bool, on condition: Condition, file: StaticString = #fileID,
                            line: UInt = #line, _ body: (inout Value) -> T) -> T {
        LockOrder.willTake(rank, file: file, line: line)
        pthread_mutex_lock(&mutex)
        defer {
            pthread_mutex_unlock(&mutex)
            LockOrder.didRelease(rank)
        }
        while !ready(value) { pthread_cond_wait(&condition.condition, &mutex) }
        return body(&value)
    }
}

/// A pthread condition variable, waited on through `Locked.withLock(when:on:)`.
public final class Condition: @unchecked Sendable {
    fileprivate var condition = pthread_cond_t()

    public init() { pthread_cond_init(&condition, nil) }

    deinit { pthread_cond_destroy(&condition) }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(&condition) }

    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(&condition) }
}

/// A read-write lock that prefers writers (a writer waits only for the holders there are when
/// it comes). Not re-entrant: a thread holding it, shared or alone, never takes it again (the
/// lock order's checker says so in debug builds; a shared take behind a waiting writer would
/// wait forever).
public final class ReadWriteLock: @unchecked Sendable {
    private var lock = pthread_rwlock_t()
    public let rank: LockRank

    public init(rank: LockRank) {
        self.rank = rank
        pb_rwlock_init_preferring_writers(&lock)
    }

    deinit { pthread_rwlock_destroy(&lock) }

    public func lockShared(file: StaticString = #fileID, line: UInt = #line) {
        LockOrder.willTake(rank, file: file, line: line)
        pthread_rwlock_rdlock(&lock)
    }

    public func unlockShared() {
        pthread_rwlock_unlock(&lock)
        LockOrder.didRelease(rank)
    }

    /// Runs `body` holding the lock alone.
    public func withExclusive<T, E: Error>(file: StaticString = #fileID, line: UInt = #line,
                                           _ body: () throws(E) -> T) throws(E) -> T {
        LockOrder.willTake(rank, file: file, line: line)
        pthread_rwlock_wrlock(&lock)
        defer {
            pthread_rwlock_unlock(&lock)
            LockOrder.didRelease(rank)
        }
        return try body()
    }
}
