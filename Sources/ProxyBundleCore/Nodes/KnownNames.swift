#if canImport(Glibc)
import Glibc
#endif

/// The names one directory holds in its layers, and which layers hold each, read once enough
/// names were looked for there in vain (a build's header search, an app probing for optional
/// resources), or at the first lookup where the directory is in many layers (a mod manager's
/// stack): a missing name is then missing without a system call, and a name is looked for only
/// in the layers that hold it, or a whiteout file for it, whatever the number of layers.
///
/// Kept as hashes: a collision only costs the system calls. The substitution (layer 0), the one
/// layer the daemon changes, is always looked in too (its names here only answer misses): a
/// whiteout made there through the mount would not show here. Names made through the mount are
/// added. Like every cached answer, what the layers gain behind the daemon's back shows after
/// an invalidation, which drops the directory descriptors and these with them.
final class KnownNames: Sendable {
    /// Misses in one directory before its names are read: reading them costs about as much as
    /// a few lookups per hundred entries, so a directory that is missed in pays back quickly.
    static let missesBeforeReading = 16
    /// In this many layers or more, a directory's names are read at its first lookup: each
    /// lookup would otherwise look in every one of them.
    static let manyLayers = 8

    /// Where the names of a directory are: by a name's hash, the layers with an entry of that
    /// name, and those with a whiteout file for it, top first.
    struct Presence {
        var entries: [Int: [UInt16]] = [:]
        var whiteouts: [Int: [UInt16]] = [:]

        /// Whether names are kept by their keys (see `CaseFold`): a mount that folds them.
        let foldsNames: Bool

        /// The entry `name` of layer `layer`: a name, or a whiteout file for one.
        mutating func add(_ name: UnsafeRawBufferPointer, layer: UInt16) {
            if let hidden = Whiteout.hiddenName(name) {
                let hash = KnownNames.hash(hidden, folded: foldsNames)
                Presence.append(layer, to: &whiteouts[hash, default: []])
            } else {
                let hash = KnownNames.hash(name, folded: foldsNames)
                Presence.append(layer, to: &entries[hash, default: []])
            }
        }

        /// Two spellings of one folded name in a layer count once. Static: an instance method
        /// would take a copy of `self` for the call, and the dictionary changed would then be
        /// copied whole at each name added.
        private static func append(_ layer: UInt16, to layers: inout [UInt16]) {
            if layers.last != layer { layers.append(layer) }
        }
    }

    /// The layers that hold a name (none: it is missing), and those with a whiteout file for it.
    struct Holding {
        var entries: [UInt16]
        var whiteouts: [UInt16]
    }

    private struct State {
        var misses = 0
        /// nil until read; never read when unreadable.
        var presence: Presence? = nil
    }
    private let state = Locked(State(), rank: .knownNames)
    /// Whether names are kept by their keys (see `CaseFold`): a mount that folds them.
    let foldsNames: Bool
    /// The view's map of the directory (see `NameMap`): the names of the patches it maps,
    /// which are therefore not read here.
    let mapped: NameMap.Directory?
    /// Where a map serves, the other layers that have the directory (the substitution and the
    /// main bundle), top first: until their names are read (a listing, or enough misses),
    /// each lookup looks in them, as on two layers, rather than reading them at the first.
    let unmapped: [UInt16]

    init(foldsNames: Bool = false, mapped: NameMap.Directory? = nil, unmapped: [Int] = []) {
        self.foldsNames = foldsNames
        self.mapped = foldsNames ? nil : mapped
        self.unmapped = unmapped.map(UInt16.init)
    }

    /// Where `name` is, top first; nil when the names were not read. With `dirs` (a lookup
    /// of the name in the directory open so), the names are read first if this is the
    /// directory's first lookup and it is in many layers. One hash and one lock a lookup.
    func holding(_ name: [UInt8], readingIn dirs: DirectoryDescriptors? = nil) -> Holding? {
        let hash = hash(name)
        return state.withLock { s in
            if let dirs, mapped == nil, s.presence == nil, s.misses == 0, dirs.present.count >= KnownNames.manyLayers {
                s.misses = 1
                s.presence = KnownNames.read(dirs, foldsNames: foldsNames, mapped: mapped)
            }
            guard let presence = s.presence else {
                // the patches' names from the map, the other layers looked in
                guard let mapped else { return nil }
                let patches = mapped.holding(hash)
                return Holding(entries: KnownNames.merge(unmapped, patches.entries), whiteouts: patches.whiteouts)
            }
            let own = Holding(entries: presence.entries[hash] ?? [], whiteouts: presence.whiteouts[hash] ?? [])
            guard let mapped else { return own }
            let patches = mapped.holding(hash)
            return Holding(entries: KnownNames.merge(own.entries, patches.entries),
                           whiteouts: KnownNames.merge(own.whiteouts, patches.whiteouts))
        }
    }

    /// Two lists of layers, each top first, as one.
    private static func merge(_ a: [UInt16], _ b: [UInt16]) -> [UInt16] {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        var merged: [UInt16] = []
        merged.reserveCapacity(a.count + b.count)
        var (i, j) = (0, 0)
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && a[i] < b[j]) {
                merged.append(a[i])
                i += 1
            } else {
                merged.append(b[j])
                j += 1
            }
        }
        return merged
    }

    /// The entries of each layer that has the directory, read for a listing of a directory in
    /// `present` layers: when that is many, its names need not be read again.
    func learn(_ read: [Layer.Entries], present: Int) {
        guard present >= KnownNames.manyLayers, state.withLock({ $0.presence == nil }) else { return }
        var presence = Presence(foldsNames: foldsNames)
        for (number, list) in read where mapped?.maps(number) != true {
            let layer = UInt16(number)
            list.withNames { names in
                for entry in list.entries {
                    presence.add(UnsafeRawBufferPointer(start: names.cString(entry), count: Int(entry.length)), layer: layer)
                }
            }
        }
        state.withLock { s in
            if s.presence == nil { s.presence = presence }
        }
    }

    /// A name looked for in vain in the directory open as `dirs`; on the last miss allowed,
    /// the names of every layer it has are read.
    func missed(_ dirs: DirectoryDescriptors) {
        state.withLock { s in
            guard s.presence == nil, s.misses < KnownNames.missesBeforeReading else { return }
            s.misses += 1
            guard s.misses == KnownNames.missesBeforeReading else { return }
            s.presence = KnownNames.read(dirs, foldsNames: foldsNames, mapped: mapped)
        }
    }

    /// A name made in the directory through the mount.
    func added(_ name: [UInt8]) {
        let hash = hash(name)
        state.withLock { s in
            if s.presence?.entries[hash]?.first != 0 { s.presence?.entries[hash, default: []].insert(0, at: 0) }
        }
    }

    /// Where the names of each layer that has the directory are (a patch's from its index
    /// record), but for the patches `mapped` has; nil when one cannot be read.
    private static func read(_ dirs: DirectoryDescriptors, foldsNames: Bool, mapped: NameMap.Directory?) -> Presence? {
        var presence = Presence(foldsNames: foldsNames)
        for layer in dirs.unmapped {
            let lists: [EntryList]?
            do { lists = try dirs.entries(in: layer) } catch { return nil }
            for list in lists ?? [] {
                list.withNames { names in
                    for entry in list.entries { presence.add(names.name(entry), layer: UInt16(layer)) }
                }
            }
        }
        return presence
    }

    private func hash(_ name: [UInt8]) -> Int {
        name.withUnsafeBytes { KnownNames.hash($0, folded: foldsNames) }
    }

    /// The hash of `bytes`, or of their key where names fold.
    static func hash(_ bytes: UnsafeRawBufferPointer, folded: Bool) -> Int {
        folded ? CaseFold.key(bytes).withUnsafeBytes { hash($0) } : hash(bytes)
    }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
