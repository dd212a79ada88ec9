#if canImport(Glibc)
import Glibc
#endif

/// Whether the request a thread serves was interrupted: the caller got a signal (Ctrl-C), the
/// kernel sent FUSE_INTERRUPT, and nobody waits for the answer any more. Long operations (a
/// directory materialized for a rename, a large copy-up) ask between steps and give up with
/// EINTR, removing what they made, so that nothing changed.
public final class Interruption: Sendable {
    /// The serving thread's check, as an unmanaged box (nil while it serves nothing long).
    private let key: pthread_key_t

    private final class Check {
        let isInterrupted: () -> Bool
        init(_ isInterrupted: @escaping () -> Bool) { self.isInterrupted = isInterrupted }
    }

    public init() {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        self.key = key
    }

    deinit { pthread_key_delete(key) }

    /// Runs `body` on this thread with `isInterrupted` telling whether its request was.
    public func whileServing<T, E: Error>(_ isInterrupted: @escaping () -> Bool,
                                          _ body: () throws(E) -> T) throws(E) -> T {
        let previous = pthread_getspecific(key)
        let check = Unmanaged.passRetained(Check(isInterrupted))
        pthread_setspecific(key, check.toOpaque())
        defer {
            pthread_setspecific(key, previous)
            check.release()
        }
        return try body()
    }

    /// Whether this thread's request was interrupted (false when nothing was said).
    public var isInterrupted: Bool {
        guard let raw = pthread_getspecific(key) else { return false }
        return Unmanaged<Check>.fromOpaque(raw).takeUnretainedValue().isInterrupted()
    }

    /// EINTR when this thread's request was interrupted.
    func check() throws(Errno) {
        if isInterrupted { throw Errno(EINTR) }
    }
}

/// A long copy in progress (materializing a directory), for `.stats`.
public struct LongCopy: Sendable {
    /// The directory being copied, relative to the mount's root.
    public var path: String
    public var entries: Int = 0
    public var bytes: Int64 = 0
}
