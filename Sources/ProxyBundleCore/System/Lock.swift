#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// A pthread mutex guarding a value. Chosen over `Synchronization.Mutex` because
/// ThreadSanitizer on Linux can see pthread locks.
public final class Locked<Value>: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    @inline(__always)
    public func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body(&value)
    }
}

/// A read-write lock that prefers writers (a writer waits only for the holders there are when
/// it comes), and that a thread holding it, shared or alone, may take shared again (counted per
/// thread, so the inner take never waits behind a writer).
public final class ReadWriteLock: @unchecked Sendable {
    private var lock = pthread_rwlock_t()
    /// This thread's shared holds, as a pointer-sized count; `alone` added while it holds the
    /// lock alone.
    private var depth = pthread_key_t()
    private static let alone = 1 << 32

    public init() {
        pb_rwlock_init_preferring_writers(&lock)
        pthread_key_create(&depth, nil)
    }

    deinit {
        pthread_rwlock_destroy(&lock)
        pthread_key_delete(depth)
    }

    private var held: Int { Int(bitPattern: pthread_getspecific(depth)) }

    public func lockShared() {
        let held = self.held
        if held == 0 { pthread_rwlock_rdlock(&lock) }
        pthread_setspecific(depth, UnsafeRawPointer(bitPattern: held + 1))
    }

    public func unlockShared() {
        let held = self.held
        pthread_setspecific(depth, UnsafeRawPointer(bitPattern: held - 1))
        if held == 1 { pthread_rwlock_unlock(&lock) }
    }

    /// Whether this thread holds the lock alone.
    public var isHeldAlone: Bool { held >= ReadWriteLock.alone }

    /// Runs `body` holding the lock alone; never called while this thread holds it.
    public func withExclusive<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(&lock)
        pthread_setspecific(depth, UnsafeRawPointer(bitPattern: ReadWriteLock.alone))
        defer {
            pthread_setspecific(depth, nil)
            pthread_rwlock_unlock(&lock)
        }
        return try body()
    }
}
