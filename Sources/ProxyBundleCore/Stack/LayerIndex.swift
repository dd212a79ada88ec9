#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// What one patch holds, directory by directory: each directory's entries (whiteouts and the
/// opaque marker among them) and whether it is opaque, read once and kept with the layer, so
/// that a stack of thousands of thin patches asks a patch about a directory only where the
/// patch has it. Kept per layer, not per stack: a swap that keeps a layer keeps what is known
/// of it.
///
/// A directory is read the first time something asks about it or a directory below it (a
/// lookup, a listing, a copy-up): its parent's record says whether the layer has it, so a
/// layer that lacks a directory is never asked for it. The records stay exact through
/// `.invalidate`, which compares each recorded directory's change time with the one it was
/// read at and reads again those changed (`changesOnDisk`), and through `-o watch`, with
/// which each directory read is watched with inotify (in the mount's `LayerWatch`) before it
/// is read: a change seen there marks its record stale (and, for a directory made, removed or
/// renamed, every record beneath it). When the watches start over
/// (an invalidation of everything, or a lost event), each record is checked again when next
/// used: kept if the directory is the same inode with the same change time, read again
/// otherwise.
///
/// Memory: a record takes about 150 bytes, plus 21 bytes and the name for each entry (the
/// `EntryList` and a 4-byte hash a name), plus its path as the key.
///
/// Lock: `state`, a leaf (see `LockRank`), held only to read or change
/// the records, never during a system call.
final class LayerIndex: Sendable {
    /// One directory of the layer as read.
    struct Directory: Sendable {
        /// Its entries, "." and ".." left out, whiteout devices marked (see `Layer.entries`).
        let entries: EntryList
        let inode: UInt64
        /// The change time when read: a directory whose inode and change time are the same
        /// has the same entries (see `verify`).
        let changed: timespec
        /// The watch epoch it was read or checked in; it serves only in the current one.
        var checkedIn: UInt64
        // the flags last, packed together: 56 bytes a record
        /// An opaque marker or attribute: the layers below show nothing here.
        let isOpaque: Bool
        /// Changed within a clock tick of being read: a change right after it may have kept
        /// the same change time, so it is read again rather than checked (see `verify`).
        let isRacy: Bool
        /// Marked by a change seen in it: read again before it serves, kept meanwhile for the
        /// records beneath it it names.
        var isStale = false

        /// What the directory holds under `name`: the `d_type` of its entry, if any, and
        /// whether it has a whiteout file for it.
        /// Entries are told apart by their lengths first: a name's, or a `.wh.` file's for it.
        func holding(_ name: [UInt8]) -> (type: UInt8?, whiteout: Bool) {
            var type: UInt8? = nil
            var whiteout = false
            let whiteoutLength = name.count + Whiteout.prefix.count
            entries.withNames { names in
                for entry in entries.entries {
                    if Int(entry.length) == name.count {
                        if names.name(entry).elementsEqual(name) { type = entry.isWhiteoutDevice ? LayerIndex.whiteoutType : entry.type }
                    } else if Int(entry.length) == whiteoutLength, let hidden = Whiteout.hiddenName(names.name(entry)),
                              hidden.elementsEqual(name) {
                        whiteout = true
                    }
                }
            }
            return (type, whiteout)
        }

        /// The inode of subdirectory `name`, nil where the entry is not a directory.
        func subdirectory(_ name: [UInt8]) -> UInt64? {
            entries.withNames { names -> UInt64? in
                for entry in entries.entries
                where entry.type == UInt8(DT_DIR) && Int(entry.length) == name.count && names.name(entry).elementsEqual(name) {
                    return entry.inode
                }
                return nil
            }
        }

        /// The names of its subdirectories.
        var subdirectories: [[UInt8]] {
            entries.withNames { names in
                entries.entries.filter { $0.type == UInt8(DT_DIR) }.map { Array(names.name($0)) }
            }
        }
    }

    /// The directories of a patch read ahead at the mount (see `readAhead`): a thin patch has
    /// a few, a large one is read as it is used beyond these.
    static let aheadBudget = 4096

    /// The `type` of `Directory.holding` for a whiteout device (a 0/0 character device).
    static let whiteoutType: UInt8 = 0xFF

    private struct State {
        var records: [LayerPath: Directory] = [:]
        /// Bumped whenever records are marked stale or removed: a record read before is not kept.
        var version: UInt64 = 0
    }
    private let state = Locked(State(), rank: .layerIndex)

    init() {}

    /// The record of the directory at `path`, reading it (and those above it) where needed;
    /// nil where the layer has no directory there (a name on the way missing, or not a
    /// directory: a symlink is not followed). Throws what keeps a directory the records name
    /// from being read other than its absence.
    func directory(_ path: LayerPath, of layer: Layer, watch: LayerWatch) throws(Errno) -> Directory? {
        try directory(path, of: layer, watch: watch, epoch: watch.epoch)
    }

    /// `directory` in watch epoch `epoch` (read once by a caller that asks many patches): a
    /// record kept and checked in it serves as it is; otherwise its parent's (checked first,
    /// in turn) says whether it is there.
    func directory(_ path: LayerPath, of layer: Layer, watch: LayerWatch, epoch: UInt64) throws(Errno) -> Directory? {
        if let known = state.withLock({ $0.records[path] }), known.checkedIn == epoch, !known.isStale { return known }
        if path.isRoot { return try record(.root, inode: nil, of: layer, watch: watch, epoch: epoch) }
        guard let parent = try directory(path.parent, of: layer, watch: watch, epoch: epoch),
              let inode = parent.subdirectory(path.lastName) else { return nil }
        return try record(path, inode: inode, of: layer, watch: watch, epoch: epoch)
    }

    /// The record of directory `path` whose parent's record names it with `inode` (the root:
    /// nil), kept if it serves in `epoch`, else checked or read; nil if it is gone.
    private func record(_ path: LayerPath, inode: UInt64?, of layer: Layer, watch: LayerWatch,
                        epoch: UInt64) throws(Errno) -> Directory? {
        let (known, version) = state.withLock { ($0.records[path], $0.version) }
        if let known, known.checkedIn == epoch, !known.isStale, inode == nil || known.inode == inode { return known }
        let fd: Int32
        do throws(Errno) {
            guard let opened = try absentAsNil({ () throws(Errno) -> Int32 in
                try layer.open(path, flags: O_RDONLY | pb_O_DIRECTORY)
            }) else { return nil }
            fd = opened
        } catch let error where error.code == ELOOP {
            return nil  // a symlink took its place: not a directory of the layer
        }
        defer { Sys.close(fd) }
        return try keep(fd, path, known: known, version: version, watch: watch, epoch: epoch)
    }

    /// Checks or reads the directory at `path` open for reading as `fd`, whose record was
    /// `known` at the index's `version`, and keeps what it found unless the index changed
    /// meanwhile.
    private func keep(_ fd: Int32, _ path: LayerPath, known: Directory?, version: UInt64, watch: LayerWatch,
                      epoch: UInt64) throws(Errno) -> Directory {
        // watched before it is read or checked: no change after goes unseen
        watch.watch(fd, index: self, path: path)
        let st = try Sys.fstat(fd)
        let read: Directory
        if let known, !known.isStale, !known.isRacy, UInt64(st.st_ino) == known.inode,
           st.st_ctim.tv_sec == known.changed.tv_sec, st.st_ctim.tv_nsec == known.changed.tv_nsec {
            read = Directory(entries: known.entries, inode: known.inode, changed: known.changed, checkedIn: epoch,
                             isOpaque: known.isOpaque, isRacy: false)
        } else {
            read = try LayerIndex.read(fd, st, epoch: epoch)
        }
        state.withLock { s in
            // changes came meanwhile, or the directory above was read again without this one:
            // what was read serves this once, and is read again next time
            guard s.version == version else { return }
            if let known, known.inode != read.inode || known.subdirectories != read.subdirectories {
                s.version &+= 1
                LayerIndex.removeBeneath(path, known, keeping: read, in: &s)
            }
            s.records[path] = read
        }
        return read
    }

    /// Reads every directory of the layer not yet read, top down, up to `budget` of them (a
    /// large patch is read as it is used beyond that): at the mount, on threads of their own,
    /// so that thousands of thin patches are known by their first lookups. Each directory is
    /// opened beneath the one above it by its single name, never following a symlink. Stops
    /// at the first directory that cannot be read (it is read again when used).
    func readAhead(of layer: Layer, watch: LayerWatch, budget: Int) {
        let epoch = watch.epoch
        guard let root = try? layer.open(.root, flags: O_RDONLY | pb_O_DIRECTORY) else { return }
        var remaining = budget
        readAhead(root, .root, watch: watch, epoch: epoch, remaining: &remaining)
    }

    /// `readAhead` from the directory at `path` open as `fd` (closed here).
    private func readAhead(_ fd: Int32, _ path: LayerPath, watch: LayerWatch, epoch: UInt64, remaining: inout Int) {
        defer { Sys.close(fd) }
        guard remaining > 0 else { return }
        remaining -= 1
        let (known, version) = state.withLock { ($0.records[path], $0.version) }
        let record: Directory
        if let known, known.checkedIn == epoch, !known.isStale {
            record = known
        } else {
            guard let read = try? keep(fd, path, known: known, version: version, watch: watch, epoch: epoch) else { return }
            record = read
        }
        for name in record.subdirectories {
            let child = try? name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Layer.open(flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC, preservingAccessTime: true) {
                    (flags: Int32) throws(Errno) -> Int32 in try Sys.check { openat(fd, p, flags) }
                }
            }
            guard let child else { continue }
            readAhead(child, path.appending(name), watch: watch, epoch: epoch, remaining: &remaining)
        }
    }

    /// Reads the directory open for reading as `fd`, whose attributes are `st`.
    private static func read(_ fd: Int32, _ st: stat, epoch: UInt64) throws(Errno) -> Directory {
        let entries = try Layer.entries(of: fd)
        var opaque = entries.withNames { names in entries.entries.contains { names.name($0).elementsEqual(Whiteout.opaqueMarker) } }
        if !opaque { opaque = hasOpaqueAttribute(fd) }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        // the kernel stamps changes with a clock that lags by up to a tick (10 ms at most)
        let age = (now.tv_sec - st.st_ctim.tv_sec) * 1_000_000_000 + (now.tv_nsec - st.st_ctim.tv_nsec)
        return Directory(entries: entries, inode: UInt64(st.st_ino), changed: st.st_ctim, checkedIn: epoch,
                         isOpaque: opaque, isRacy: age < 20_000_000)
    }

    /// Whether the directory open as `fd` has an overlay opaque attribute set to "y".
    private static func hasOpaqueAttribute(_ fd: Int32) -> Bool {
        // most directories have no attribute: a buffer on the stack, nothing allocated
        var list = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 1024) { buffer -> [CChar]? in
            let length = flistxattr(fd, buffer.baseAddress, buffer.count)
            if length < 0 { return errno == ERANGE ? nil : [] }
            return length == 0 ? [] : Array(buffer[..<length])
        }
        if list == nil { list = (try? Sys.listxattr(fd: fd))?.map { CChar(bitPattern: $0) } }
        guard let list, !list.isEmpty else { return false }
        let names = list.split(separator: 0)
        for attribute in Whiteout.opaqueAttributes where names.contains(where: { $0.elementsEqual(attribute.utf8CString.dropLast()) }) {
            var value: [UInt8] = [0, 0]
            if fgetxattr(fd, attribute, &value, value.count) == 1 && value[0] == UInt8(ascii: "y") { return true }
        }
        return false
    }

    /// A change seen in the directory at `path` of the layer (inotify: `name` made, removed,
    /// renamed, or its attributes changed; `isDirectory` when the entry is one): the record is
    /// read again before it next serves, and a directory made, removed or renamed takes the
    /// records beneath it along (an attribute change, the opaque one, only its own record).
    func changed(_ path: LayerPath, name: [UInt8], isDirectory: Bool, structural: Bool) {
        state.withLock { s in
            s.version &+= 1
            if structural || name.isEmpty { s.records[path]?.isStale = true }
            guard isDirectory, !name.isEmpty else { return }
            let below = path.appending(name)
            if structural {
                LayerIndex.remove(below, in: &s)
            } else {
                s.records[below]?.isStale = true
            }
        }
    }

    /// Everything at and beneath `path`, and the directories on the way to it, are read again
    /// before they next serve (`invalidate PATH`).
    func forget(subtree path: LayerPath) {
        state.withLock { s in
            s.version &+= 1
            var at = LayerPath.root
            s.records[at]?.isStale = true
            for name in path.bytes.split(separator: UInt8(ascii: "/")) {
                at = at.appending(Array(name))
                s.records[at]?.isStale = true
            }
            LayerIndex.remove(path, in: &s)
        }
    }

    /// Removes the record of `path` and every record beneath it.
    private static func remove(_ path: LayerPath, in s: inout State) {
        guard let record = s.records.removeValue(forKey: path) else { return }
        for name in record.subdirectories { remove(path.appending(name), in: &s) }
    }

    /// `path` was read again as `read` where it was `old`: the records of subdirectories no
    /// longer there (or another directory now) go, with everything beneath them.
    private static func removeBeneath(_ path: LayerPath, _ old: Directory, keeping read: Directory, in s: inout State) {
        for name in old.subdirectories {
            if old.inode == read.inode, let inode = old.subdirectory(name), read.subdirectory(name) == inode { continue }
            remove(path.appending(name), in: &s)
        }
    }

    /// The changes made on disk to the directories recorded since they were read, where they
    /// are not watched (see `LayerWatch.watchesIndexes`), for an exact `.invalidate`: each
    /// recorded directory, top down, opened beneath its parent by its single name (a symlink
    /// is not followed), is kept where its inode and change time are the same (a directory's
    /// change time moves with every entry made, removed or renamed in it and with its extended
    /// attributes), else read again and told by its names: an entry made, removed or changed
    /// (another type or inode) as in `LayerWatch.IndexedChange`, and a change of its opacity
    /// as one of every name (an empty name). A record read within a clock tick of a change
    /// (`isRacy`) is read again whatever its change time. The records themselves are marked
    /// by `changed` as the caller tells them. Costs three system calls a directory where
    /// nothing changed (open, `fstat`, close), one where it has no subdirectory (`fstatat`
    /// beside it).
    func changesOnDisk(of layer: Layer) -> [LayerWatch.IndexedChange] {
        let records = state.withLock { $0.records }
        guard let root = records[.root] else { return [] }
        var changes: [LayerWatch.IndexedChange] = []
        guard let fd = try? layer.open(.root, flags: O_RDONLY | pb_O_DIRECTORY) else {
            changes.append(LayerWatch.IndexedChange(index: self, path: .root, name: [], structural: true, isDirectory: false))
            return changes
        }
        scan(fd, .root, root, records, into: &changes)
        return changes
    }

    /// `changesOnDisk` of the directory at `path` open for reading as `fd` (closed here),
    /// recorded as `record`, and of those beneath it that `records` holds. Returns whether
    /// the directory's own change time moved (its mode, owner or times may have too).
    @discardableResult
    private func scan(_ fd: Int32, _ path: LayerPath, _ record: Directory, _ records: [LayerPath: Directory],
                      into changes: inout [LayerWatch.IndexedChange]) -> Bool {
        defer { Sys.close(fd) }
        var gone = Set<[UInt8]>()  // subdirectories told as changed: their records go with them
        func change(_ name: [UInt8], isDirectory: Bool, structural: Bool = true) {
            changes.append(LayerWatch.IndexedChange(index: self, path: path, name: name, structural: structural,
                                                    isDirectory: isDirectory))
            if isDirectory { gone.insert(name) }
        }
        // a stale record is read before it next serves; those beneath it are still checked
        var moved = false
        if !record.isStale {
            guard let st = try? Sys.fstat(fd) else { change([], isDirectory: false); return true }
            let same = !record.isRacy && UInt64(st.st_ino) == record.inode && st.st_ctim.tv_sec == record.changed.tv_sec
                && st.st_ctim.tv_nsec == record.changed.tv_nsec
            if !same {
                moved = true
                guard let read = try? LayerIndex.read(fd, st, epoch: record.checkedIn) else { change([], isDirectory: false); return true }
                LayerIndex.difference(record, read, change)
            }
        }
        for name in record.subdirectories where !gone.contains(name) {
            let below = path.appending(name)
            guard let child = records[below] else { continue }
            // a directory with none below it is looked at beside its parent: one system call
            if child.subdirectories.isEmpty, !child.isStale, !child.isRacy,
               let st = try? name.withCStringCopy({ (p: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(fd, p) }),
               UInt64(st.st_ino) == child.inode, st.st_ctim.tv_sec == child.changed.tv_sec,
               st.st_ctim.tv_nsec == child.changed.tv_nsec {
                continue
            }
            let opened = try? name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Layer.open(flags: O_RDONLY | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC, preservingAccessTime: true) {
                    (flags: Int32) throws(Errno) -> Int32 in try Sys.check { openat(fd, p, flags) }
                }
            }
            guard let opened else {
                change(name, isDirectory: true)
                continue
            }
            if scan(opened, below, child, records, into: &changes) {
                change(name, isDirectory: true, structural: false)  // its attributes, as inotify's IN_ATTRIB
            }
        }
        return moved
    }

    /// Tells `change` each name whose entry differs between `old` and `new`, two reads of one
    /// directory (whether the entry is or was a directory), and an empty name for its opacity.
    private static func difference(_ old: Directory, _ new: Directory,
                                   _ change: (_ name: [UInt8], _ isDirectory: Bool, _ structural: Bool) -> Void) {
        struct Seen: Equatable {
            let type: UInt8
            let inode: UInt64
            let device: Bool
        }
        var before: [[UInt8]: Seen] = [:]
        old.entries.withNames { names in
            for entry in old.entries.entries {
                before[Array(names.name(entry))] = Seen(type: entry.type, inode: entry.inode, device: entry.isWhiteoutDevice)
            }
        }
        new.entries.withNames { names in
            for entry in new.entries.entries {
                let name = Array(names.name(entry))
                let now = Seen(type: entry.type, inode: entry.inode, device: entry.isWhiteoutDevice)
                let was = before.removeValue(forKey: name)
                if was != now {
                    change(name, now.type == UInt8(DT_DIR) || was?.type == UInt8(DT_DIR), true)
                }
            }
        }
        for (name, was) in before { change(name, was.type == UInt8(DT_DIR), true) }
        if old.isOpaque != new.isOpaque { change([], false, true) }
    }

    /// The number of directories recorded (for `.stats` and tests).
    var count: Int { state.withLock { $0.records.count } }
}
