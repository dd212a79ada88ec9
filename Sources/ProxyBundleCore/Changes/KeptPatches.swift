#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

extension Views {
    /// For each path written to `.layers`, the patch of the current stack or of one it
    /// recently replaced that was opened at that path, where the path still names the same
    /// directory (nil: the path is to be opened). Paths side by side are looked at from one
    /// descriptor of their directory: with many of them, by reading its entries once (a
    /// name whose entry still has the patch's inode number is the patch, while no mount
    /// came or went since the names were last looked at one by one, see `MountChanges`),
    /// else with one `fstatat` each. 1,000 patches side by side cost one read of their
    /// directory, not 1,000 walks of their paths.
    func keptPatches(_ paths: [RawPath]) -> [Layer?] {
        let recent = recentPatches
        let mounts = mountChanges.poll()
        var kept = [Layer?](repeating: nil, count: paths.count)
        var start = 0
        while start < paths.count {
            let bytes = paths[start].bytes
            let slash = bytes.lastIndex(of: UInt8(ascii: "/")) ?? 0
            var end = start + 1
            while end < paths.count, paths[end].bytes.lastIndex(of: UInt8(ascii: "/")) == slash,
                  paths[end].bytes[..<slash].elementsEqual(bytes[..<slash]) {
                end += 1
            }
            Views.checkKept(paths, start..<end, parentLength: slash, recent, byEntries: mounts.unchanged, into: &kept)
            start = end
        }
        mountChanges.checked(mounts)
        return kept
    }

    /// Fewer patches side by side than this are looked at one by one.
    static let readsKeptDirectoryFrom = 8

    /// Sets `kept` for the paths of `range`, whose directory is the first `slash` bytes of each.
    private static func checkKept(_ paths: [RawPath], _ range: Range<Int>, parentLength slash: Int, _ recent: [RawPath: Layer],
                                  byEntries: Bool, into kept: inout [Layer?]) {
        var candidates: [Int] = []
        for index in range {
            guard let layer = recent[paths[index]] else { continue }
            kept[index] = layer
            candidates.append(index)
        }
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
        let reads = byEntries && candidates.count >= readsKeptDirectoryFrom
        var fd = reads ? parent.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } : -1
        if fd < 0 { fd = parent.withCString { open($0, pb_O_PATH | O_DIRECTORY | O_CLOEXEC) } }
        defer { if fd >= 0 { Sys.close(fd) } }
        guard fd >= 0 else {
            for index in candidates { kept[index] = nil }
            return
        }
        var found = [Bool](repeating: false, count: paths.count)
        var directory = stat()
        if reads, fstat(fd, &directory) == 0 {
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
        for index in candidates where !found[index] {
            var st = stat()
            let looked = Array(name(index)).withCStringCopy { fstatat(fd, $0, &st, 0) } == 0
            if let layer = kept[index], !looked || !isSame(st, layer) { kept[index] = nil }
        }
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
}
