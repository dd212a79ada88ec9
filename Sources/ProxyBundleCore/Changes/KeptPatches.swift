#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

extension Views {
    /// For each path written to `.layers`, the patch of the current stack or of one it
    /// recently replaced that was opened at that path, where the path still names the same
    /// directory (nil: the path is to be opened). Paths side by side are looked at from one
    /// descriptor of their directory, while no mount came or went since the names were last
    /// looked at one by one (see `MountChanges`): not at all if the directory has the change
    /// time it had when they were last found there (see `KeptDirectory`), else, with many of
    /// them, by reading its entries once (a name whose entry still has the patch's inode
    /// number is the patch); otherwise with one `fstatat` each. 1,000 patches side by side
    /// cost an `fstat` of their directory, not 1,000 walks of their paths.
    func keptPatches(_ paths: [RawPath]) -> [Layer?] {
        let mounts = mountChanges.poll()
        var kept = [Layer?](repeating: nil, count: paths.count)
        // a list of some recent stack's patches in its order (a swap back) is matched in
        // order, without hashing a path
        let stacks = [current.layers] + recent.map(\.layers)
        if let same = stacks.first(where: { $0.patches.count == paths.count && zip($0.patches, paths).allSatisfy { $0.path == $1 } }) {
            kept = same.patches.map { $0 }
        } else {
            let recent = recentPatches
            for index in paths.indices { kept[index] = recent[paths[index]] }
        }
        var start = 0
        while start < paths.count {
            let bytes = paths[start].bytes
            let slash = bytes.lastIndex(of: UInt8(ascii: "/")) ?? 0
            var end = start + 1
            while end < paths.count, paths[end].bytes.lastIndex(of: UInt8(ascii: "/")) == slash,
                  paths[end].bytes[..<slash].elementsEqual(bytes[..<slash]) {
                end += 1
            }
            checkKept(paths, start..<end, parentLength: slash, mounts: mounts, into: &kept)
            start = end
        }
        mountChanges.checked(mounts)
        return kept
    }

    /// Fewer patches side by side than this are looked at one by one.
    static let readsKeptDirectoryFrom = 8

    /// Keeps in `kept` the patches of `range` (whose directory is the first `slash` bytes of
    /// each path) that their paths still name.
    private func checkKept(_ paths: [RawPath], _ range: Range<Int>, parentLength slash: Int, mounts: MountChanges.Seen,
                           into kept: inout [Layer?]) {
        let candidates = range.filter { kept[$0] != nil }
        guard !candidates.isEmpty else { return }
        func name(_ index: Int) -> ArraySlice<UInt8> { paths[index].bytes[(slash + 1)...] }
        func isSame(_ st: stat, _ layer: Layer) -> Bool { UInt64(st.st_dev) == layer.device && UInt64(st.st_ino) == layer.inode }
        let plain = slash == 0 || candidates.contains { name($0).isEmpty || name($0) == [0x2E] || name($0) == [0x2E, 0x2E] }
        guard !plain else {
            for index in candidates {
                var st = stat()
                if let layer = kept[index], paths[index].withCString({ stat($0, &st) }) != 0 || !isSame(st, layer) { kept[index] = nil }
            }
            return
        }
        let parent = RawPath(bytes: Array(paths[range.lowerBound].bytes[..<slash]))
        let reads = mounts.unchanged && candidates.count >= Views.readsKeptDirectoryFrom
        var fd = reads ? parent.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } : -1
        if fd < 0 { fd = parent.withCString { open($0, pb_O_PATH | O_DIRECTORY | O_CLOEXEC) } }
        defer { if fd >= 0 { Sys.close(fd) } }
        guard fd >= 0 else {
            for index in candidates { kept[index] = nil }
            return
        }
        var found = [Bool](repeating: false, count: paths.count)
        var directory = stat()
        let known = reads && fstat(fd, &directory) == 0 ? KeptDirectory(directory) : nil
        // no name of the directory changed since these patches were found there
        let unchanged = known.flatMap { mountChanges.found(in: parent, $0) } ?? []
        var left = 0
        for index in candidates {
            if let layer = kept[index], unchanged.contains(ObjectIdentifier(layer)) { found[index] = true } else { left += 1 }
        }
        if left > 0, known != nil {
            // the candidates by inode number, on the directory's file system (a patch that
            // is a mount's root has another, and is looked at by name)
            var byInode: [UInt64: [Int]] = [:]
            for index in candidates where kept[index]?.device == UInt64(directory.st_dev) {
                byInode[kept[index]?.inode ?? 0, default: []].append(index)
            }
            try? readDirectory(fd) { entry in
                guard let indices = byInode[entry.inode] else { return }
                for index in indices where name(index).elementsEqual(entry.bytes) { found[index] = true }
            }
        }
        // only what the directory's own entries name is covered by its change time: not a
        // patch reached through a symlink there, nor a mount's root
        let entries = candidates.filter { found[$0] }
        for index in candidates where !found[index] {
            var st = stat()
            let looked = Array(name(index)).withCStringCopy { fstatat(fd, $0, &st, 0) } == 0
            if let layer = kept[index], !looked || !isSame(st, layer) { kept[index] = nil }
        }
        if let known, left > 0 { mountChanges.remember(entries.compactMap { kept[$0].map(ObjectIdentifier.init) }, in: parent, known) }
    }
}

/// A directory of patches as `fstat` saw it: an entry made, removed or renamed in it changes
/// its change time. Trusted only if that time was 20 ms old when seen (a clock tick could
/// give a change made just after it the same time).
struct KeptDirectory: Equatable {
    var device: UInt64
    var inode: UInt64
    var changed: timespec

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        changed = st.st_ctim
    }

    static func == (a: KeptDirectory, b: KeptDirectory) -> Bool {
        a.device == b.device && a.inode == b.inode && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }

    /// Whether its change time is 20 ms old now.
    var isSettled: Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let age = (Int64(now.tv_sec) - Int64(changed.tv_sec)) * 1_000_000_000 + Int64(now.tv_nsec) - Int64(changed.tv_nsec)
        return age >= 20_000_000
    }
}

/// Whether a mount or unmount may have put another directory at a patch's path since the kept
/// patches' paths were last looked at one by one: `/proc/self/mountinfo`, held open, polls as
/// changed (POLLPRI) after every change of the daemon's mount namespace. An entry read from
/// a directory keeps the inode number of the directory beneath a mount made on it.
final class MountChanges: Sendable {
    struct Seen {
        /// The changes counted when polled.
        var count: UInt64
        /// Whether none came since the paths were last looked at one by one.
        var unchanged: Bool
    }

    private struct State {
        /// -2: not opened yet; -1: cannot be (every look is then by name).
        var fd: Int32 = -2
        var count: UInt64 = 0
        var checkedAt: UInt64?
        /// The patches last found in each directory, and the directory as it was then.
        var directories: [RawPath: (directory: KeptDirectory, patches: Set<ObjectIdentifier>)] = [:]
    }

    private let state = Locked(State(), rank: .recentViews)

    deinit {
        state.withLock { s in if s.fd >= 0 { Sys.close(s.fd) } }
    }

    /// Counts a change if the mount table changed since the last poll.
    func poll() -> Seen {
        state.withLock { s in
            if s.fd == -2 { s.fd = max(-1, open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) }
            guard s.fd >= 0 else { return Seen(count: s.count, unchanged: false) }
            var polled = pollfd(fd: s.fd, events: Int16(POLLPRI), revents: 0)
            if Glibc.poll(&polled, 1, 0) < 0 || polled.revents & Int16(POLLPRI | POLLERR) != 0 { s.count += 1 }
            return Seen(count: s.count, unchanged: s.checkedAt == s.count)
        }
    }

    /// The paths were looked at as `seen` says: one by one unless unchanged.
    func checked(_ seen: Seen) {
        state.withLock { s in if s.count == seen.count { s.checkedAt = seen.count } }
    }

    /// The patches last found in directory `path`, if it is still as it was then (`directory`).
    func found(in path: RawPath, _ directory: KeptDirectory) -> Set<ObjectIdentifier>? {
        state.withLock { s in s.directories[path].flatMap { $0.directory == directory ? $0.patches : nil } }
    }

    /// `patches` were found in directory `path`, as it was then; remembered if its change
    /// time is settled. A directory's patches replace those remembered before, and only a
    /// few directories are remembered.
    func remember(_ patches: [ObjectIdentifier], in path: RawPath, _ directory: KeptDirectory) {
        let settled = directory.isSettled
        state.withLock { s in
            if s.directories.count >= 64 && s.directories[path] == nil { s.directories.removeAll() }
            s.directories[path] = settled ? (directory, Set(patches)) : nil
        }
    }
}
