#if canImport(Glibc)
import Glibc
#endif
import ProxyBundleCore

/// Decides which entries of a readdirplus reply carry their attributes, by what programs did
/// with earlier listings. Attributes spare a LOOKUP per entry to a program that stats or opens
/// what it lists (`find`, `ls -l`, `rsync`, `tar`), but cost the daemon a stat and the kernel
/// an inode per entry, which a program that only lists (`ls -f`, a shell glob) never uses:
/// listing 20,000 entries takes five times as long with them.
///
/// A program not yet known to use its listings gets the attributes of a listing's first batch
/// but for two samples (its first directory and its first other entry), and none in later
/// batches. Once one of its threads looks up a name in a directory listed to it that way, the
/// program (by its command name, `/proc/TID/comm`) is known to use its listings, and from then
/// on, in this mount, every entry listed to it carries attributes.
///
/// The kernel keeps a listing read to its end (the readdir cache), also one given with names
/// alone: listing the directory again (`ls -f`, a glob) then never reaches the daemon. Such a
/// listing is dropped from the kernel once a name in it is looked up, so that the next program
/// listing the directory gets the attributes: a program that stats what it lists reads a
/// cached names-only listing with a LOOKUP per entry once, and never again.
final class ListingReaders: Sendable {
    enum Attributes: Equatable {
        /// Every entry with attributes.
        case all
        /// Every entry but two samples (the first directory, the first other entry).
        case allButSamples
        /// Names and types only.
        case none
    }

    /// A command name (`comm`), or for a thread whose name cannot be read, its ID in decimal.
    typealias Program = [UInt8]

    private struct State {
        /// The program of each thread that listed a directory lately, most recent last.
        var threads: [(thread: pid_t, program: Program)] = []
        /// Programs known to use what they list.
        var users: [Program] = []
        /// Listings given without some attributes to threads of programs not known yet, most
        /// recent last.
        var watched: [(thread: pid_t, directory: NodeID)] = []
        /// Directories being listed with names alone past the first batch.
        var namesOnly: [NodeID] = []
        /// Directories whose listing the kernel keeps with names alone past the first batch.
        var cachedNamesOnly: [NodeID] = []
        /// Programs seen walking: listing a directory whose parent the same thread listed.
        var walkers: [Program] = []
        /// The directories threads of known programs listed lately, most recent last.
        var listed: [(thread: pid_t, directory: NodeID)] = []
        /// LOOKUP requests, for `.stats`.
        var lookups: UInt64 = 0
    }

    /// How many threads, programs and directories are remembered.
    static let remembered = 64
    private let state = Locked(State(), rank: .listingReaders)

    /// A listing of `directory` was read to its end, and the kernel keeps it: if it went with
    /// names alone past its first batch, the first lookup of a name in it drops it.
    func finished(_ directory: NodeID) {
        state.withLock { state in
            guard let index = state.namesOnly.firstIndex(of: directory) else { return }
            state.namesOnly.remove(at: index)
            if !state.cachedNamesOnly.contains(directory) { Self.remember(directory, in: &state.cachedNamesOnly) }
        }
    }

    /// What a readdirplus batch at `offset` of `directory`'s listing carries for `thread`.
    func attributes(thread: pid_t, directory: NodeID, offset: off_t) -> Attributes {
        let program = program(of: thread)
        return state.withLock { state in
            if state.users.contains(program) { return .all }
            if !state.watched.contains(where: { $0 == (thread, directory) }) {
                Self.remember((thread, directory), in: &state.watched)
            }
            if offset == 0 { return .allButSamples }
            if !state.namesOnly.contains(directory) { Self.remember(directory, in: &state.namesOnly) }
            return .none
        }
    }

    /// Whether `thread`, starting a listing of `directory` in `parent`, walks a tree, so that
    /// the subdirectories of this listing are worth reading ahead: its program was seen to
    /// list a directory after the directory's parent, in one thread (`find`, `du`, `cp -r`,
    /// `ls -lR`; not `ls -l`).
    func walks(thread: pid_t, directory: NodeID, parent: NodeID?) -> Bool {
        let program = program(of: thread)
        return state.withLock { state in
            if state.walkers.contains(program) { return true }
            defer { Self.remember((thread, directory), in: &state.listed) }
            guard let parent, state.listed.contains(where: { $0 == (thread, parent) }) else { return false }
            Self.remember(program, in: &state.walkers)
            return true
        }
    }

    /// A lookup of a name in `parent` by `thread`: if `parent` was listed to it without some
    /// attributes, its program uses its listings. Whether the kernel should drop the listing
    /// of `parent` it keeps (one with names alone: see the type).
    func noteLookup(thread: pid_t, parent: NodeID) -> Bool {
        state.withLock { state in
            state.lookups += 1
            var drops = false
            if let index = state.cachedNamesOnly.firstIndex(of: parent) {
                state.cachedNamesOnly.remove(at: index)
                drops = true
            }
            guard state.watched.contains(where: { $0 == (thread, parent) }),
                  let program = state.threads.first(where: { $0.thread == thread })?.program else { return drops }
            state.watched.removeAll { $0.thread == thread }
            if !state.users.contains(program) { Self.remember(program, in: &state.users) }
            return drops
        }
    }

    /// LOOKUP requests so far, the programs known to use their listings and those seen
    /// walking (for `.stats`).
    var figures: (lookups: UInt64, users: [String], walkers: [String]) {
        state.withLock { state in
            (state.lookups, state.users.map { String(decoding: $0, as: UTF8.self) },
             state.walkers.map { String(decoding: $0, as: UTF8.self) })
        }
    }

    private static func remember<T>(_ item: T, in list: inout [T]) {
        if list.count == remembered { list.removeFirst() }
        list.append(item)
    }

    /// The program of `thread`, remembered from its last listing or read from `/proc`.
    private func program(of thread: pid_t) -> Program {
        if let known = state.withLock({ state in state.threads.first { $0.thread == thread }?.program }) {
            return known
        }
        let program = Self.commandName(of: thread)
        state.withLock { state in Self.remember((thread, program), in: &state.threads) }
        return program
    }

    /// The command name of `thread`, from `/proc`.
    static func commandName(of thread: pid_t) -> Program {
        let fallback = Array(String(thread).utf8)
        guard thread > 0 else { return fallback }
        let fd = open("/proc/\(thread)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return fallback }
        defer { close(fd) }
        var name = [UInt8](repeating: 0, count: 32)
        let count = name.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return fallback }
        return Array(name[..<count].prefix { $0 != 0x0A })
    }
}
