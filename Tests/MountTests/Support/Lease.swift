import Foundation

/// A write lease (fcntl F_SETLEASE) on a layer's file: the next open of it by another process,
/// the daemon's included, waits until the lease is let go (or the kernel's lease-break-time,
/// 45 s by default, passes). A test holds the daemon at a known point with it: `isWanted`
/// tells that someone waits in that open.
final class Lease {
    // Linux's fcntl commands, which Glibc as imported by Swift lacks
    private static let setLease: Int32 = 1024, getLease: Int32 = 1025, setSignal: Int32 = 10
    private let fd: Int32
    let path: String

    init(_ path: String) throws {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TestFailure("open \(path): \(String(cString: strerror(errno)))") }
        // the breaker's signal goes to this process: SIGURG, which it ignores, not SIGIO
        guard fcntl(fd, Lease.setSignal, SIGURG) == 0, fcntl(fd, Lease.setLease, Int32(F_WRLCK)) == 0 else {
            let code = errno
            close(fd)
            throw TestFailure("lease on \(path): \(String(cString: strerror(code)))")
        }
    }

    /// Whether an open of the file waits for the lease: the kernel asks it to become a read
    /// lease (an open for reading) or to go (for writing).
    var isWanted: Bool { fcntl(fd, Lease.getLease) != Int32(F_WRLCK) }

    /// Lets the waiting open go on.
    func release() {
        if fd >= 0 { _ = fcntl(fd, Lease.setLease, Int32(F_UNLCK)) }
    }

    /// Whether the file is open nowhere else (not by the daemon, nor by the kernel for a
    /// passthrough backing, which keeps the daemon's open file): the lease can then be taken
    /// again, as a write lease is refused while any other open of the file lasts.
    var isSoleOpen: Bool {
        guard fcntl(fd, Lease.setLease, Int32(F_WRLCK)) == 0 else { return false }
        release()
        return true
    }

    deinit { close(fd) }
}

extension Lease {
    /// Starts `mv from to`, a rename that materializes a directory whose copy opens the leased
    /// file, and returns once that open waits for the lease. Throws if mv ended first (its pid
    /// is then never signalled: a reaped process's pid may be another's by now).
    func moveHeld(_ from: String, to: String) throws -> pid_t {
        let mover = try Spawn.start("/bin/mv", [from, to])
        var exited: Int32? = nil
        try eventually("the copy waits for the lease") {
            exited = Spawn.exited(mover)
            return exited != nil || isWanted
        }
        if let exited { throw TestFailure("mv ended (status \(exited)) before its copy reached the lease") }
        return mover
    }
}
