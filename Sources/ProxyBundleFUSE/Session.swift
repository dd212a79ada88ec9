#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// One FUSE session: created with its mount options, mounted, served by libfuse's
/// multi-threaded loop (and, over io_uring, by the rings' threads) until unmounted or
/// signalled, then unmounted and destroyed.
public final class Session {
    private let session: OpaquePointer
    private let userdata: Unmanaged<FuseServer>
    private var mounted = false
    /// The FUSE connection's number (the minor of the mount's device), once mounted.
    private var connection: Substring?
    /// The connection's `abort` file in fusectl, opened once mounted where fusectl is: a write
    /// to it later reaches this connection or, once the connection is gone, none, never
    /// another that took its number since (see `abortConnection`).
    private var abortFile: Int32 = -1
    private let transport: Transport

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// `options` are FUSE mount options as `-o` takes them (e.g. "ro", "fsname=..."), as
    /// bytes: a value may be a path that is not UTF-8.
    public init(server: FuseServer, options: [[UInt8]], transport: Transport = .auto) throws(Failure) {
        self.transport = transport
        var ops = Operations.table()
        let list = Array(options.joined(separator: [UInt8(ascii: ",")]))
        let arguments = [Array("proxybundle".utf8)] + (options.isEmpty ? [] : [Array("-o".utf8), list])
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { $0.withCStringCopy { strdup($0) } }
        defer { argv.forEach { free($0) } }
        userdata = Unmanaged.passRetained(server)
        let created = pb_session_new(Int32(arguments.count), &argv, &ops, userdata.toOpaque())
        guard let created else {
            userdata.release()
            throw Failure(description: "libfuse refused the mount options \(RawPath(bytes: list))")
        }
        session = created
        server.notifier.attach(created)
    }

    /// What serves the session's requests.
    public var server: FuseServer { userdata.takeUnretainedValue() }

    deinit {
        if abortFile >= 0 { close(abortFile) }
        userdata.takeUnretainedValue().notifier.detach()
        if mounted { fuse_session_unmount(session) }
        fuse_session_destroy(session)
        userdata.release()
    }

    public func mount(at mountpoint: RawPath) throws(Failure) {
        guard mountpoint.withCString({ fuse_session_mount(session, $0) }) == 0 else {
            throw Failure(description: "cannot mount on \(mountpoint) (is /dev/fuse accessible and the mountpoint an empty directory?)")
        }
        mounted = true
        // read from the mount table: a stat of the mountpoint would ask this daemon, not serving yet
        connection = MountTable.current().mount(at: mountpoint).flatMap { $0.type.hasPrefix("fuse") ? $0.device.split(separator: ":").last : nil }
        if let connection { abortFile = open("\(Session.connections)/\(connection)/abort", O_WRONLY | O_CLOEXEC) }
        // PROXYBUNDLE_NO_PASSTHROUGH=1 keeps every open page-cached (the tests of that path use it)
        let passthrough = getenv("PROXYBUNDLE_NO_PASSTHROUGH") == nil
        if pb_session_use_io(session, passthrough ? 1 : 0) == 0, passthrough {
            userdata.takeUnretainedValue().passthrough.enable(fuseDevice: fuse_session_fd(session))
        }
        // mounted: the patches' indexes are read before the mount is reported ready (up to
        // 2 s; past that, while the first requests come), by more threads than cores, as
        // after a boot the reads wait on the disk more than on a core
        userdata.takeUnretainedValue().overlay.readPatchesAhead(threads: Session.indexThreads, waitingUpTo: Session.indexSeconds)
    }

    /// How long a mount waits for the patches' indexes to be read before it reports ready.
    static let indexSeconds = 2.0
    /// How many threads read the patches' indexes at the mount. With cold caches (2 cores,
    /// virtio disk), `find` over the 102,000 directories of 10,000 thin patches took 4.6 s in
    /// 8 processes and 7.4 s in 2; warm, the cores are the limit either way.
    static let indexThreads = 8

    /// Serves requests until the file system is unmounted or SIGINT, SIGTERM or SIGHUP
    /// arrives; then unmounts and closes the overlay. Returns 0 on a clean end. A worker that has answered a request
    /// polls for the next one up to `spinMicroseconds` before it sleeps.
    public func run(maxThreads: UInt32 = 16, spinMicroseconds: UInt32 = 20) -> Int32 {
        pb_spin_set_limit(spinMicroseconds)
        userdata.takeUnretainedValue().workers.withLock { $0 = (maxThreads, spinMicroseconds) }
        // the rings (where used) start once INIT is answered, with threads of their own
        pb_uring_configure(session, transport.code, maxThreads)
        let handlers = fuse_set_signal_handlers(session)
        let result = pb_session_loop_mt(session, maxThreads, 4)
        if handlers == 0 { fuse_remove_signal_handlers(session) }
        pb_uring_stop()
        let server = userdata.takeUnretainedValue()
        // what the kernel was never told to forget (its connection ended first)
        server.logger.debug("at the end, the kernel held \(server.overlay.cacheStatistics.nodes) nodes")
        // no notification once the device may be closed (its number may be another file's)
        server.notifier.detach(unblocking: abortConnection)
        if mounted {
            fuse_session_unmount(session)
            mounted = false
        }
        // nothing of the daemon's stays in the substitution
        server.stopWatching()
        server.overlay.close()
        return result < 0 ? 1 : 0
    }

    /// Ends the connection as closing its device would, through the kernel's fusectl file
    /// system: a notification stuck in the kernel holds the device open, waiting for a
    /// directory lock that an unread request holds, and the kernel fails that request only when
    /// the connection ends.
    /// The file is the one opened at the mount; where fusectl was not mounted then, it is
    /// mounted now (once: not over itself) and the file opened by the connection's number.
    private func abortConnection() {
        guard let connection else { return }
        let path = "\(Session.connections)/\(connection)/abort"
        let server = userdata.takeUnretainedValue()
        var file = abortFile
        abortFile = -1
        if file < 0 {
            if MountTable.current().mount(at: RawPath(bytes: Array(Session.connections.utf8)))?.type != "fusectl" {
                _ = Glibc.mount("fusectl", Session.connections, "fusectl", 0, nil)
            }
            file = open(path, O_WRONLY | O_CLOEXEC)
        }
        guard file >= 0, write(file, "1", 1) == 1 else {
            let error = Errno(errno)
            if file >= 0 { close(file) }
            return server.logger.warning("a notification is stuck in the kernel and \(path) cannot be written (\(error.name)): the daemon waits for it")
        }
        close(file)
        server.logger.info("a notification was stuck in the kernel at the end: connection \(connection) aborted")
    }

    /// Where the kernel's fusectl file system is mounted.
    private static let connections = "/sys/fs/fuse/connections"
}
