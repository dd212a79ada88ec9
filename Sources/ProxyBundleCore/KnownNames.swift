#if canImport(Glibc)
import Glibc
#endif

/// The names one directory holds in its layers, read once enough names were looked for there
/// in vain: a name not among them is then missing without a system call (a build's header
/// search, an app probing for optional resources).
///
/// Kept as hashes: a collision only costs the system calls. Names made through the mount are
/// added; names removed stay, and are only looked for again. Like every cached answer, what
/// the layers gain behind the daemon's back shows after an invalidation, which drops the
/// directory descriptors and these with them.
final class KnownNames: Sendable {
    /// Misses in one directory before its names are read: reading them costs about as much as
    /// a few lookups per hundred entries, so a directory that is missed in pays back quickly.
    static let missesBeforeReading = 16

    private struct State {
        var misses = 0
        /// nil until read; never read when unreadable.
        var hashes: Set<Int>? = nil
    }
    private let state = Locked(State())

    /// False only when the names were read and `name` is not among them.
    func mayHave(_ name: [UInt8]) -> Bool {
        let hash = KnownNames.hash(name)
        return state.withLock { $0.hashes?.contains(hash) ?? true }
    }

    /// A name looked for in vain in the directory open as `dirs`; on the last miss allowed,
    /// the names of every layer it has are read.
    func missed(_ dirs: DirectoryDescriptors) {
        state.withLock { s in
            guard s.hashes == nil, s.misses < KnownNames.missesBeforeReading else { return }
            s.misses += 1
            guard s.misses == KnownNames.missesBeforeReading else { return }
            var hashes = Set<Int>()
            for layer in dirs.present {
                guard (try? KnownNames.read(dirs[layer], into: &hashes)) != nil else { return }
            }
            s.hashes = hashes
        }
    }

    /// A name made in the directory through the mount.
    func added(_ name: [UInt8]) {
        let hash = KnownNames.hash(name)
        state.withLock { s in _ = s.hashes?.insert(hash) }
    }

    /// Adds the hashes of the names in the directory open (O_PATH) as `fd`.
    private static func read(_ fd: Int32, into hashes: inout Set<Int>) throws(Errno) {
        let dir = try Sys.check { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        try Sys.readDirectory(dir) { entry, _ in
            Sys.withName(entry) { name, length in
                _ = hashes.insert(hash(UnsafeRawBufferPointer(start: name, count: length)))
            }
        }
    }

    private static func hash(_ name: [UInt8]) -> Int {
        name.withUnsafeBytes { hash($0) }
    }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
