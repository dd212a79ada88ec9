#if canImport(Glibc)
import Glibc
#endif

/// A value pinned to the calling thread for the length of a call, and what nested calls on
/// that thread see (see `Overlay.pinView`). The first `enter` pins; nested ones count.
final class ThreadPin<Value: AnyObject & Sendable>: Sendable {
    private let key: pthread_key_t

    private final class Box {
        let value: Value
        var depth = 1
        init(_ value: Value) { self.value = value }
    }

    init() {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        self.key = key
    }

    deinit { pthread_key_delete(key) }

    /// Pins `current()` on this thread, unless a value is pinned already (nested calls keep it).
    func enter(_ current: () -> Value) {
        if let raw = pthread_getspecific(key) {
            Unmanaged<Box>.fromOpaque(raw).takeUnretainedValue().depth += 1
            return
        }
        pthread_setspecific(key, Unmanaged.passRetained(Box(current())).toOpaque())
    }

    /// Ends one `enter`; the last lets the value go.
    func leave() {
        guard let raw = pthread_getspecific(key) else { return }
        let box = Unmanaged<Box>.fromOpaque(raw)
        let value = box.takeUnretainedValue()
        value.depth -= 1
        if value.depth == 0 {
            pthread_setspecific(key, nil)
            box.release()
        }
    }

    /// The value pinned on this thread, if any.
    var pinned: Value? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<Box>.fromOpaque(raw).takeUnretainedValue().value
    }
}
