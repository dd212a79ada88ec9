#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The directories of the layers the daemon has looked into, watched with inotify, so that an
/// invalidation flushes just the names that changed on disk instead of everything. Each
/// directory node is watched in the layers that have it before any of its names is resolved
/// there, so no change to what was resolved can pass unseen. When exactness is lost (the
/// event queue overflowed, a watch could not be added, inotify is unavailable), `changes`
/// answers nil and the invalidation is a full one.
///
/// Not seen by inotify, hence by the exact invalidation: writes to a layer's file through a
/// shared mapping (mmap), and changes to it through a hard link in a directory the daemon has
/// not looked into. `proxybundle invalidate --all` (`/` written to `.invalidate`) flushes
/// everything whatever happened.
///
/// The directories of patches are watched by the layer's index instead (`LayerIndex`), each
/// once, as it is read, and only with `-o watch` (`watchesIndexes`), which must hear of a
/// change by itself: a change there is reported with the layer's directory it was seen in,
/// and its directory node is found by that path. Without it, `.invalidate` finds what changed
/// in the patches by their directories' change times (`LayerIndex.changesOnDisk`): a watch
/// cost more than reading the directory (a path through /proc to name it, a mark the kernel
/// keeps, and the inode it pins), 102,000 of them under 10,000 thin patches, more than a small
/// machine's `max_user_watches`.
///
/// The folder `Changes/` owns what happens when layers change behind the daemon's back:
/// watching (this type), marking what changed stale, and invalidating everything.
final class LayerWatch: Sendable {
    /// A name that changed on disk in a directory node.
    struct Change {
        var directory: NodeID
        var name: [UInt8]
        /// Created, removed, renamed (or its whiteout or a directory's attributes changed):
        /// the name may lead elsewhere now. Otherwise only a file's content or attributes.
        /// An empty name stands for every name of the directory (its opaque marker changed).
        var structural: Bool
    }

    /// A change seen in a directory a layer's index read: the directory by its path in the
    /// layer (and the view), the name as in `Change`, and whether the entry is a directory.
    struct IndexedChange {
        var index: LayerIndex
        var path: LayerPath
        var name: [UInt8]
        var structural: Bool
        var isDirectory: Bool
    }

    private struct State {
        var fd: Int32 = -1
        /// Watch descriptor → the directory node it watches.
        var nodes: [Int32: NodeID] = [:]
        /// Directory node → the placement it was watched with and its watch descriptors.
        var watched: [NodeID: (placement: Placement, descriptors: [Int32])] = [:]
        /// Watch descriptor → the index and the path of the directory it read there.
        var indexed: [Int32: (index: LayerIndex, path: LayerPath)] = [:]
        /// A watch could not be added: the next invalidation must be a full one.
        var lost = false
        /// Counts the starts over: what was read under another epoch's watches is checked
        /// again before it serves (see `LayerIndex`).
        var epoch: UInt64 = 0
        /// Whether the directories indexes read are watched (`-o watch`; see the type's doc).
        var watchesIndexes = false
    }

    private let state = Locked(State(), rank: .layerWatch)

    /// The watches' epoch: bumped at each start over.
    var epoch: UInt64 { state.withLock { $0.epoch } }

    static let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_ATTRIB | IN_ONLYDIR)

    init() {
        state.withLock { LayerWatch.start(&$0) }
    }

    deinit {
        state.withLock { if $0.fd >= 0 { Sys.close($0.fd) } }
    }

    private static func start(_ s: inout State) {
        s = State(epoch: s.epoch &+ 1, watchesIndexes: s.watchesIndexes)
        s.fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        s.lost = s.fd < 0
    }

    /// Whether the directories patches' indexes read are watched: set with `-o watch` before
    /// any is read (see the type's doc).
    var watchesIndexes: Bool {
        get { state.withLock { $0.watchesIndexes } }
        set { state.withLock { $0.watchesIndexes = newValue } }
    }

    /// Watches the directory open as `fd`, which `index` reads at `path`, before it is read,
    /// where indexes are watched. The watch is added outside the lock (indexes read ahead on
    /// several threads), and kept unless the watches started over meanwhile.
    func watch(_ fd: Int32, index: LayerIndex, path: LayerPath) {
        let (inotify, epoch, lost, watches) = state.withLock { ($0.fd, $0.epoch, $0.lost, $0.watchesIndexes) }
        if lost || !watches { return }
        let wd = inotify_add_watch(inotify, "/proc/self/fd/\(fd)", LayerWatch.mask)
        state.withLock { s in
            guard s.epoch == epoch else { return }
            guard wd >= 0 else {
                s.lost = true
                return
            }
            s.indexed[wd] = (index, path)
        }
    }

    /// Watches directory node `id` in the layers where `dirs` has it, unless it already is
    /// with that placement.
    func watch(_ id: NodeID, _ dirs: DirectoryDescriptors) {
        state.withLock { s in
            if s.lost || s.watched[id]?.placement == dirs.placement { return }
            var descriptors: [Int32] = []
            // a patch's directories are watched by its index
            for fd in dirs.present.filter({ !dirs.isIndexed($0) }).flatMap(dirs.allDescriptors) {
                let wd = inotify_add_watch(s.fd, "/proc/self/fd/\(fd)", LayerWatch.mask)
                guard wd >= 0 else {
                    s.lost = true
                    return
                }
                s.nodes[wd] = id
                descriptors.append(wd)
            }
            s.watched[id] = (dirs.placement, descriptors)
        }
    }

    /// Forgets every watch and starts over (after everything was invalidated).
    func restart() {
        state.withLock { s in
            if s.fd >= 0 { Sys.close(s.fd) }
            LayerWatch.start(&s)
        }
    }

    /// The directory nodes watched, with the placement each was watched with: read before
    /// the node table is locked (this lock is never taken under the table's).
    var watchedPlacements: [NodeID: Placement] {
        state.withLock { $0.watched.mapValues(\.placement) }
    }

    /// After a swap of the patches: the directory nodes renumbered into the new stack keep
    /// their watches (of the substitution and the main bundle, which a swap keeps) under their
    /// new placements; the others (nil) are watched again when next looked into.
    func keepWatching(placements: [NodeID: Placement?]) {
        unwatch(placements.compactMap { $0.value == nil ? $0.key : nil })
        state.withLock { s in
            for case let (id, placement?) in placements { s.watched[id]?.placement = placement }
        }
    }

    /// Stops watching these directory nodes (their names led elsewhere): they are watched
    /// again when next looked into.
    func unwatch(_ ids: [NodeID]) {
        state.withLock { s in
            for id in ids {
                guard let entry = s.watched.removeValue(forKey: id) else { continue }
                for wd in entry.descriptors {
                    _ = inotify_rm_watch(s.fd, wd)
                    s.nodes[wd] = nil
                }
            }
        }
    }

    /// Waits up to `milliseconds` for a change to be seen; whether one is waiting to be read.
    func waitForChanges(milliseconds: Int32) -> Bool {
        let fd = state.withLock { $0.fd }
        guard fd >= 0 else {
            usleep(useconds_t(milliseconds) * 1000)
            return false
        }
        // the descriptor may be closed by a restart meanwhile: the poll then ends at its timeout
        var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&waiting, 1, milliseconds) > 0 && waiting.revents & Int16(POLLIN) != 0
    }

    /// The bytes of changes waiting to be read (growing while changes go on).
    func pendingBytes() -> Int {
        state.withLock { s in s.fd >= 0 ? max(0, Int(pb_pending_bytes(s.fd))) : 0 }
    }

    /// The changes seen since the last call, to directory nodes and to directories indexes
    /// read; nil when they cannot be known exactly, after which the watches start over (the
    /// caller invalidates everything).
    func changes() -> (nodes: [Change], indexed: [IndexedChange])? {
        state.withLock { s in
            var changes: [Change] = []
            var indexed: [IndexedChange] = []
            var exact = !s.lost
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            while exact {
                let count = buffer.withUnsafeMutableBytes { read(s.fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }  // EAGAIN: nothing more
                exact = buffer.withUnsafeBytes { LayerWatch.parse($0.prefix(count), s, into: &changes, &indexed) }
            }
            if !exact { LayerWatch.start(&s) }
            return exact ? (changes, indexed) : nil
        }
    }

    /// Appends the changes that `events` (inotify records) describe; false on an overflow.
    private static func parse(_ events: Slice<UnsafeRawBufferPointer>, _ s: State,
                              into changes: inout [Change], _ indexed: inout [IndexedChange]) -> Bool {
        let header = MemoryLayout<inotify_event>.size
        var offset = events.startIndex
        while offset + header <= events.endIndex {
            let event = events.base.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
            let nameStart = offset + header
            offset = nameStart + Int(event.len)
            if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { return false }
            guard event.len > 0 else { continue }  // IN_IGNORED, or the directory itself
            let name = Array(events.base[nameStart..<min(offset, events.endIndex)].prefix { $0 != 0 })
            let isDirectory = event.mask & UInt32(IN_ISDIR) != 0
            let contentOnly = event.mask & UInt32(IN_MODIFY | IN_ATTRIB) != 0
            if let (index, path) = s.indexed[event.wd] {
                if !(contentOnly && !isDirectory) {
                    indexed.append(IndexedChange(index: index, path: path, name: name, structural: !contentOnly,
                                                 isDirectory: isDirectory))
                }
                continue
            }
            guard let directory = s.nodes[event.wd] else { continue }
            if name == Whiteout.opaqueMarker {
                // the directory's placement may change: all of it
                changes.append(Change(directory: directory, name: [], structural: true))
            } else if name.starts(with: Whiteout.reservedPrefix) {
                continue  // the copy-up work directory
            } else if let hidden = Whiteout.hiddenName(name) {
                changes.append(Change(directory: directory, name: hidden, structural: true))
            } else {
                changes.append(Change(directory: directory, name: name, structural: !(contentOnly && !isDirectory)))
            }
        }
        return true
    }
}
