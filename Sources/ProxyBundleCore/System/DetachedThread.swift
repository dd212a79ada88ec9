#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own for `body`, detached: nothing joins it. Where the process's threads
/// are all taken by requests (the closing of removed files, reading ahead, watching the
/// layers, telling systemd or the kernel something after a reply). False, and `body` never
/// runs, when the thread cannot be started.
public enum DetachedThread {
    @discardableResult
    public static func start(_ body: @escaping () -> Void) -> Bool {
        final class Job: @unchecked Sendable {
            let body: () -> Void
            init(_ body: @escaping () -> Void) { self.body = body }
        }
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Job(body)).toOpaque()
        guard pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            Unmanaged<Job>.fromOpaque(context).takeRetainedValue().body()
            return nil
        }, context) == 0 else {
            Unmanaged<Job>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
