#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import Logging
import ProxyBundleCore

/// How long the kernel may keep what it was told, in seconds, and whether it keeps file
/// pages and directory listings across opens. Long by default: changes made through the mount
/// keep the caches right, and `.invalidate` flushes them after changes made behind its back.
public struct CacheTimeouts: Sendable, Equatable {
    public var entry: Double
    public var attribute: Double
    /// 0 means "do not cache missing names".
    public var negative: Double
    /// Keep file pages and directory listings cached across opens.
    public var keepsContent: Bool

    public init(entry: Double, attribute: Double, negative: Double, keepsContent: Bool = true) {
        self.entry = entry
        self.attribute = attribute
        self.negative = negative
        self.keepsContent = keepsContent
    }

    public static let standard = CacheTimeouts(entry: 86400, attribute: 86400, negative: 86400)
    /// `-o nocache`: the kernel caches nothing.
    public static let none = CacheTimeouts(entry: 0, attribute: 0, negative: 0, keepsContent: false)
}

/// The state every request handler reaches through `fuse_req_userdata`: the overlay and the
/// settings of this mount. Handlers translate between FUSE and `Overlay`; they hold no logic.
public final class FuseServer: Sendable {
    public let overlay: Overlay
    /// The cache timeouts now (a remount changes them, see Remount.swift).
    public var timeouts: CacheTimeouts { currentTimeouts.withLock { $0 } }
    let currentTimeouts: Locked<CacheTimeouts>
    /// Takes the claim on the substitution a writable mount holds (see `WriterLock`), when a
    /// read-only mount is made writable; whether it could.
    let claimsSubstitution: @Sendable () -> Bool
    /// Whether to ask the kernel to enforce POSIX ACLs (`-o acl`), and whether it does.
    let usesACL: Bool
    let enforcesACL = Locked(false, rank: .serverSettings)
    let logger: Logger
    /// PROXYBUNDLE_NO_EPOCH=1 in the environment makes invalidation take the path used on
    /// kernels before 6.16 (one notification per cached name); the tests use it.
    let notifier = KernelNotifier(usesEpoch: getenv("PROXYBUNDLE_NO_EPOCH") == nil)
    /// Held for the length of each invalidation, so they run one at a time.
    /// First in the daemon's lock order (see `LockRank`).
    let invalidations = Locked(InvalidationRecord(), rank: .invalidations)
    /// Whether changes in the layers are invalidated as they settle (`-o watch`).
    let watching = Locked(false, rank: .serverSettings)
    /// The worker loop's `max_threads` and `spin` (microseconds), as `Session.run` set them (for `.stats`).
    let workers = Locked((threads: UInt32(0), spin: UInt32(0)), rank: .serverSettings)
    /// Where the mount is (a patch given to `.layers` must not lie inside it).
    let mountpoint: RawPath
    /// When the server was made (seconds since the epoch), for `.stats`' `started`.
    let started: Int
    /// Reads and writes of open files straight to the layers' files, where the kernel allows.
    let passthrough = Passthrough()
    /// GETXATTR requests answered, for `.stats` (the kernel asks for security.capability before
    /// a write unless the daemon clears set-ID bits itself).
    let extendedAttributeReads = Locked<UInt64>(0, rank: .serverSettings)
    /// Long requests whose caller gave up while they ran (FUSE_INTERRUPT), for `.stats`.
    let interruptedRequests = Locked<UInt64>(0, rank: .serverSettings)
    /// Which listings carry attributes with their entries.
    let listingReaders = ListingReaders()
    /// The listings being read.
    let listings = ListingStore()
    let prefetcher: Prefetcher
    /// The generation of every node but the root (whose must be 0) in every reply: a file
    /// handle holds a node ID and its generation, and node IDs start again at each mount, so
    /// a handle from an earlier mount answers ESTALE instead of opening whatever file got
    /// its node ID now. Within a mount, node IDs are never reused.
    let generation = UInt64(UInt32.random(in: 1...UInt32.max))

    public init(overlay: Overlay, timeouts: CacheTimeouts, logger: Logger,
                mountpoint: RawPath, usesACL: Bool = false,
                claimsSubstitution: @escaping @Sendable () -> Bool = { true }) {
        self.overlay = overlay
        self.usesACL = usesACL
        self.prefetcher = Prefetcher(overlay: overlay)
        self.currentTimeouts = Locked(timeouts, rank: .serverSettings)
        self.claimsSubstitution = claimsSubstitution
        self.logger = logger
        self.mountpoint = mountpoint
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        started = now.tv_sec
        notifier.whenOverflowing { [weak self] in self?.invalidateEverything() }
    }

    func entryParameters(_ entry: Overlay.Entry, _ request: Request) -> fuse_entry_param {
        let timeouts = self.timeouts
        var result = fuse_entry_param()
        result.ino = entry.node
        result.generation = entry.node == rootNodeID ? 0 : generation
        result.attr = shownWithinACL(entry.attributes, of: entry.node, request)
        result.attr_timeout = ControlFile(node: entry.node) == nil ? timeouts.attribute : 0
        result.entry_timeout = timeouts.entry
        return result
    }

    /// Attributes as the kernel is to see them: without `-o acl` (where the kernel checks the
    /// mode bits alone), an entry with an access ACL shows no bits the ACL refuses to someone
    /// they would grant (`Overlay.modeWithinACL`). One read of the ACL per reply; measured in
    /// docs/DESIGN.md against enforcing ACLs by default.
    func shownWithinACL(_ st: stat, of node: NodeID, _ request: Request) -> stat {
        guard st.st_mode & 0o077 != 0, st.st_mode & S_IFMT != S_IFLNK, !enforcesACL.withLock({ $0 }) else { return st }
        let acl = overlay.accessACL(request, of: node)
        if acl.isEmpty { return st }
        var shown = st
        shown.st_mode = Overlay.modeWithinACL(st.st_mode, acl: acl)
        return shown
    }

    /// A lookup reply: the entry, or for a missing name with negative caching on, an entry
    /// with node 0 so the kernel remembers the absence. Only an absence the daemon remembers
    /// too is cached by the kernel: an invalidation can then name it, where that is needed.
    /// "." and ".." come only from the kernel's file handle code (see `Overlay.lookupItself`).
    func lookupReply(_ request: Request, parent: NodeID, name: [UInt8]) throws(Errno) -> Reply {
        if name == [0x2E] { return .entry(entryParameters(try overlay.lookupItself(request, parent), request)) }
        if name == [0x2E, 0x2E] { return .entry(entryParameters(try overlay.lookupParent(request, of: parent), request)) }
        switch try overlay.find(request, name, in: parent) {
        case .found(let entry):
            return .entry(entryParameters(entry, request))
        case .absent(let remembered):
            let timeouts = self.timeouts
            guard timeouts.negative > 0, remembered || !overlay.cachesLookups else { throw Errno.noEntry }
            var negative = fuse_entry_param()
            negative.entry_timeout = timeouts.negative
            return .entry(negative)
        }
    }

    /// Runs `body` for request `req` (as `request`), telling long copies within it whether
    /// the caller has given up (a signal: the kernel sent FUSE_INTERRUPT); they then stop with
    /// EINTR.
    func interruptible<T>(_ req: fuse_req_t?, _ request: Request, _ body: () throws(Errno) -> T) throws(Errno) -> T {
        guard let req else { return try body() }
        // counts the interrupt when it arrives (at once if it came before); unregistered
        // before the reply, which frees the request
        fuse_req_interrupt_func(req, { _, server in
            guard let server else { return }
            Unmanaged<FuseServer>.fromOpaque(server).takeUnretainedValue().interruptedRequests.withLock { $0 += 1 }
        }, Unmanaged.passUnretained(self).toOpaque())
        defer { fuse_req_interrupt_func(req, nil, nil) }
        return try request.whileInterruptible(body)
    }

    /// Where the kernel asked for it (an OPEN with O_TRUNC, a WRITE through the daemon, by a
    /// writer without CAP_FSETID), clears the set-ID bits of the file open as `fd` before it
    /// changes; the kernel's copy of its mode is dropped, as this reply does not carry one.
    func clearSetIDBitsBeforeWrite(_ request: Request, _ node: NodeID, _ fd: Int32) throws(Errno) {
        guard pb_request_clears_setid() != 0 else { return }
        if try overlay.clearSetIDBits(request, node, openFile: fd) != nil {
            notifier.invalidateAttributes(of: node)
        }
    }

    /// Who made the request, without supplementary groups: the owner of what it makes.
    func owner(_ req: fuse_req_t) -> Requester {
        let context = fuse_req_ctx(req)
        return Requester(uid: context?.pointee.uid ?? 0, gid: context?.pointee.gid ?? 0, groups: [],
                         umask: context?.pointee.umask ?? 0)
    }

    /// Logs a failed request as libfuse's `-d` would show it: the operation and the path it
    /// concerns (node `node`, and `name` in it), as a warning for EIO and at debug otherwise.
    func log(failure error: Errno, in operation: StaticString, node: fuse_ino_t, name: UnsafePointer<CChar>?,
             _ request: Request) {
        let level: Logger.Level = error.code == EIO ? .warning : .debug
        guard logger.logLevel <= level else { return }
        var path = node == 0 ? "" : overlay.displayPath(request, of: node)
        if let name { path += (path.hasSuffix("/") ? "" : "/") + String(decoding: bytes(name), as: UTF8.self) }
        let subject = path.isEmpty ? "" : " " + path
        logger.log(level: level, "\(operation)\(subject)\(level == .warning ? " failed" : ""): \(error.name)")
    }
}

/// What only the kernel's request can tell the overlay: the caller's supplementary groups and
/// whether the caller gave up waiting.
struct KernelRequest: RequestOrigin {
    let req: fuse_req_t

    func groups() -> [gid_t] {
        var groups = [gid_t](repeating: 0, count: 64)
        // read from /proc/PID/task/TID/status: six system calls, so only where groups matter
        let count = fuse_req_getgroups(req, Int32(groups.count), &groups)
        groups.removeSubrange(max(0, min(Int(count), groups.count))...)
        return groups
    }

    var isInterrupted: Bool { fuse_req_interrupted(req) != 0 }
}

/// A C string from the kernel as the overlay's byte name.
@inline(__always)
func bytes(_ name: UnsafePointer<CChar>?) -> [UInt8] {
    guard let name else { return [] }
    return Array(UnsafeRawBufferPointer(start: name, count: strlen(name)))
}
