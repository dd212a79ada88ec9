import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// One writer per substitution directory: a writable mount's daemon holds an exclusive
/// `flock` on the directory for its life, so a second writable mount of it is refused (two
/// daemons would each clear the other's copy-up work and write over each other), as kernel
/// overlayfs refuses an upper directory in use. The kernel drops the lock with the daemon's
/// last descriptor, so a crashed daemon leaves none behind; nothing is written to the
/// directory. Read-only mounts take no lock.
enum WriterLock {
    /// Takes the lock on `substitution` and returns the descriptor that holds it (kept open
    /// for the daemon's life), or fails with a line naming the mount that holds it. A lock no
    /// mount holds any more is waited for (unless `patience` is 0): the daemon of a mount just
    /// taken away (`umount` returns before the daemon has exited) lets go as it exits, which
    /// is waited for as such, up to `ExitingWriter.patience` seconds; any other holder, up to
    /// `patience` seconds.
    static func acquire(_ substitution: RawPath, patience: Double = 2) throws(Failure) -> Int32 {
        let fd = substitution.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else {
            throw Failure("substitution directory \(substitution) cannot be opened: \(Errno(errno).description)")
        }
        var waits = Int(patience * 100)
        let exitDeadline = time(nil) + Int(ExitingWriter.patience)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            if error == EINTR { continue }
            guard error == EWOULDBLOCK else {
                close(fd)
                throw Failure("substitution directory \(substitution) cannot be locked: \(Errno(error).description)")
            }
            guard patience > 0, writer(of: substitution) == nil else {
                close(fd)
                throw Failure(heldMessage(substitution))
            }
            if let exiting = ExitingWriter.holding(fd) {
                let left = Int32(clamping: exitDeadline - time(nil))
                guard left > 0, exiting.waitForExitOrMountChange(seconds: left) else {
                    close(fd)
                    throw Failure("substitution directory \(substitution) is still held by daemon \(exiting.pid) of an "
                                  + "earlier mount, which has not exited after \(ExitingWriter.patience) seconds")
                }
                continue
            }
            guard waits > 0 else {
                close(fd)
                throw Failure(heldMessage(substitution))
            }
            waits -= 1
            usleep(10_000)
        }
        return fd
    }

    /// Whether `substitution` could be locked now (the lock is let go at once): the check the
    /// command makes before it starts a daemon, for a message in the user's terminal.
    static func check(_ substitution: RawPath) throws(Failure) {
        close(try acquire(substitution))
    }

    /// Who writes `substitution` (other than the mount at `excluding`), in a line that says
    /// what to do.
    static func heldMessage(_ substitution: RawPath, excluding: RawPath? = nil) -> ByteText {
        guard let holder = writer(of: substitution, excluding: excluding) else {
            return "substitution directory \(substitution) is already written by another proxybundle mount; "
                + "each writable mount needs a substitution of its own (or mount with -o ro)"
        }
        let pid = holder.pid.map { " (daemon \($0))" } ?? ""
        return "substitution directory \(substitution) is already written by the mount at \(holder.mountpoint)\(pid); "
            + "unmount it first, give another --substitution, or mount with -o ro"
    }

    /// The live, writable proxybundle mount of `substitution` other than the one at
    /// `excluding` (a read-only mount of it holds no lock).
    private static func writer(of substitution: RawPath, excluding: RawPath? = nil) -> RunningMount? {
        RunningMount.all().first {
            $0.isAlive && $0.substitution == substitution && $0.mountpoint != excluding && $0.stat("read_only") != "yes"
        }
    }
}

/// The writer lock a daemon holds: taken when a writable mount starts, or when a read-only one
/// is remounted writable; kept until the daemon exits (also when remounted read-only again).
final class WriterClaim: Sendable {
    let substitution: RawPath
    private let descriptor = Locked<Int32>(-1, rank: .writerLock)

    init(_ substitution: RawPath) { self.substitution = substitution }

    /// Takes the lock unless held already, waiting up to `patience` seconds for a daemon that
    /// is exiting (see `WriterLock.acquire`).
    func take(patience: Double = 2) throws(Failure) {
        try descriptor.withLock { (fd: inout Int32) throws(Failure) in
            if fd < 0 { fd = try WriterLock.acquire(substitution, patience: patience) }
        }
    }

    /// Lets go of the lock once the daemon writes nothing more (its requests all answered and
    /// its work directory removed): before its exit closes the rest of its descriptors, whose
    /// last close can take long (a large removed file is freed then).
    func release() {
        descriptor.withLock { (fd: inout Int32) in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }
}
