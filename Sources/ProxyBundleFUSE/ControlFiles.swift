#if canImport(Glibc)
import Glibc
#endif
import CFuse3
import CFuseShim
import ProxyBundleCore

/// The requests on the control files (`.invalidate`, `.stats`, `.layers`, `.remount`; see `ControlFile`). Their
/// handles hold no descriptor, so every handler that would use one checks the node first.
///
/// What invalidates: a write to `.invalidate`, or truncating it (`truncate(2)`, `ftruncate(2)`).
/// Opening it with O_TRUNC does not: shells open that way (and the kernel passes the
/// truncation with the open) before they write the path to invalidate, so `echo DIR >
/// .invalidate` would otherwise flush everything first.
extension FuseServer {
    /// The handle of an open control file (never a descriptor).
    static let controlHandle = UInt64.max

    /// open, and create of an existing control file: no descriptor; direct I/O so every read
    /// and write reaches the daemon.
    func openControl(_ control: ControlFile, _ info: UnsafeMutablePointer<fuse_file_info>,
                     creating: Bool = false) throws(Errno) {
        let flags = info.pointee.flags
        if control == .stats && (flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0) { throw Errno(EACCES) }
        if creating && flags & O_EXCL != 0 { throw Errno(EEXIST) }
        info.pointee.fh = FuseServer.controlHandle
        info.pointee.direct_io = 1
        info.pointee.keep_cache = 0
        info.pointee.noflush = 1
    }

    func readControl(_ control: ControlFile, size: Int, offset: off_t) -> Reply {
        let text: [UInt8]
        switch control {
        case .invalidate: return .bytes([])
        case .stats: text = statsText()
        case .layers: text = overlay.layersText
        case .remount: text = Array(remountText.utf8)
        }
        let start = min(text.count, max(0, Int(offset)))
        return .bytes(Array(text[start..<min(text.count, start + size)]))
    }

    func writeControl(_ control: ControlFile, _ data: [UInt8]) throws(Errno) -> Reply {
        switch control {
        case .invalidate: try invalidate(data)
        case .layers: try replacePatches(data)
        case .remount: try remount(data)
        case .stats: throw Errno(EBADF)
        }
        return .written(data.count)
    }

    /// setattr: truncating `.invalidate` invalidates, truncating `.layers` removes every
    /// patch, truncating `.remount` changes nothing; times are accepted (so `touch` works) and
    /// left alone; anything else is refused.
    func setControlAttributes(_ control: ControlFile, _ toSet: Int32, _ request: Request) throws(Errno) -> Reply {
        let times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW
            | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME
        guard control != .stats, toSet & ~(times | FUSE_SET_ATTR_SIZE) == 0 else { throw Errno.notPermitted }
        if toSet & FUSE_SET_ATTR_SIZE != 0 {
            switch control {
            case .invalidate: try invalidate([])
            case .layers: try replacePatches([])
            case .stats, .remount: break
            }
        }
        return .attributes(try overlay.attributes(request, of: control.node), timeout: 0)
    }

    /// `.stats`: one `key: value` line per figure, after the mount's description and the
    /// daemon's pid and start time (a newline in a value is written as a backslash and `n`).
    /// The paths are the bytes they were given as, UTF-8 or not.
    func statsText() -> [UInt8] {
        let cache = overlay.cacheStatistics
        let record = invalidations.withLock { $0 }
        let epoch = notifier.acceptsEpoch.withLock { $0 }
        let opens = passthrough.statistics
        let readers = listingReaders.figures
        let listed = listings.figures
        let transport = Transport.figures
        let prefetched = prefetcher.figures
        // the main bundle and the substitution first, as before there were patches
        let stack = overlay.currentLayers
        let about: [(key: String, path: RawPath)] = [("main", stack.main.path)]
            + (stack.substitution.map { [("substitution", $0.layer.path)] } ?? [])
            + stack.patches.map { ("patch", $0.path) } + [("mountpoint", mountpoint)]
        let paths: [UInt8] = about.flatMap { Array("\($0.key): ".utf8) + FuseServer.oneLine($0.path.bytes) + [0x0A] }
        let timeouts = self.timeouts
        let lines = [
            "layers: \(stack.count)",
            "layers_open: \(overlay.openLayerCount)",
            "indexed_directories: \(overlay.indexedDirectories)",
            "read_only: \(overlay.isWritable ? "no" : "yes")",
            "casefold: \(stack.foldsNames ? "on" : "off")",
            "entry_timeout: \(timeouts.entry.secondsText)",
            "attr_timeout: \(timeouts.attribute.secondsText)",
            "negative_timeout: \(timeouts.negative.secondsText)",
            "max_threads: \(workers.withLock { $0.threads })",
            "spin: \(workers.withLock { $0.spin })",
            "pid: \(getpid())",
            "started: \(started)",
            "version: \(Version.number)",
            "commit: \(Version.commit)",
            "cache_entries: \(cache.nodes + cache.absentNames)",
            "cached_nodes: \(cache.nodes)",
            "forgotten_nodes: \(cache.forgottenNodes)",
            "cached_absent_names: \(cache.absentNames)",
            "hits: \(cache.hits)",
            "misses: \(cache.misses)",
            "invalidations: \(record.count)",
            "watch: \(watching.withLock { $0 } ? "on" : "off")",
            "automatic_invalidations: \(record.automatic)",
            "last_invalidation_seconds: \(record.lastSeconds)",
            "last_invalidation_nodes: \(record.last.nodes)",
            "last_invalidation_names: \(record.last.names)",
            "last_invalidation_exact: \(record.last.exact ? "yes" : "no")",
            "kernel_epoch_notification: \(epoch.map { $0 ? "accepted" : "refused" } ?? "not tried")",
            "passthrough: \(opens.usable ? "on" : "off")",
            "passthrough_opens: \(opens.passthrough)",
            "stale_opens: \(opens.stale)",
            "cached_opens: \(opens.cached)",
            "posix_acl: \(enforcesACL.withLock { $0 } ? "on" : "off")",
            "setid_bits_cleared_by: \(pb_daemon_clears_setid() != 0 ? "daemon" : "kernel")",
            "extended_attribute_reads: \(extendedAttributeReads.withLock { $0 })",
            "lookups: \(readers.lookups)",
            "listing_users: \(readers.users.joined(separator: ","))",
            "walkers: \(readers.walkers.joined(separator: ","))",
            "directories_read_ahead: \(prefetched.directories)",
            "files_read_ahead: \(prefetched.files)",
            "read_ahead_pending: \(prefetched.pending)",
            "materializing: " + (overlay.copiesInProgress.map { "\($0.path) (\($0.entries) entries, \($0.bytes) bytes so far)" }
                .joined(separator: "; ").nonEmpty ?? "none"),
            "interrupted_requests: \(interruptedRequests.withLock { $0 })",
            "directory_opens: \(listed.opens)",
            "listings_taken: \(listed.taken)",
            "transport: \(transport.inUse)",
            "requests_uring: \(transport.uring)",
            "requests_device: \(transport.device)",
            "transport_problem: \(transport.problem.nonEmpty.map { String(decoding: FuseServer.oneLine(Array($0.utf8)), as: UTF8.self) } ?? "none")",
        ]
        return paths + Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// `bytes` with each newline written as a backslash and `n`, to keep them on one line.
    static func oneLine(_ bytes: [UInt8]) -> [UInt8] {
        bytes.flatMap { $0 == 0x0A ? [UInt8(ascii: "\\"), UInt8(ascii: "n")] : [$0] }
    }
}

extension String {
    /// The text, or nil when it is empty.
    var nonEmpty: String? { isEmpty ? nil : self }
}
