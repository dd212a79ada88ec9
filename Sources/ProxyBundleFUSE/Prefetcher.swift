#if canImport(Glibc)
import Glibc
#endif
import CFuseShim
import ProxyBundleCore

/// Reads ahead, on a thread of its own, the directories a walk is about to list (and the
/// attributes of their entries), and the files a program reading a directory's files in turn
/// is about to open, so that their disk reads overlap those of the program: through FUSE it
/// otherwise waits for each read in turn, as the daemon answers one request at a time for it.
/// The directory announced last goes first, as a walk goes depth first; one the walk lists
/// first is dropped; at most 4,096 wait. Files go before directories. The thread runs at a
/// lower priority and changes nothing.
final class Prefetcher: @unchecked Sendable {
    /// Guards every field but `order` and `orders` (the read-ahead thread's own); its value:
    /// the requests the read-ahead thread has taken and not finished (0 or 1).
    private let mutex = Locked(0, rank: .prefetcher)
    /// Signalled when a request comes.
    private let condition = Condition()
    private var pending: [(parent: NodeID, name: [UInt8])] = []
    private var count: UInt64 = 0
    /// The directory each recent reader last opened a file in, how many in a row, whether its
    /// files were found in the page cache already, and the file it opened last.
    private var opens: [(thread: pid_t, parent: NodeID, run: Int, cached: Bool, last: NodeID)] = []
    /// Files opened in turn, the newest last, with the file the same thread opened before in
    /// the same directory: the files after them are to be read ahead.
    private var fileRequests: [(thread: pid_t, parent: NodeID, node: NodeID, previous: NodeID?)] = []
    /// The order each recent reader was last seen opening files in (the read-ahead thread's).
    private var orders: [(thread: pid_t, order: FileOrder.Order)] = []
    private var filesRead: UInt64 = 0
    /// The directories whose files were read ahead lately, most recent last: a file found in
    /// the page cache there may be one read ahead, which tells nothing of the rest.
    private var readAheadIn: [NodeID] = []
    /// The read-ahead thread's own: the directory whose files it reads ahead.
    private var order: FileOrder?
    private let overlay: Overlay
    static let limit = 4096
    /// Files read ahead of the one opened, and how much of each.
    static let filesAhead = 16
    static let fileBytes = 1 << 20

    init(overlay: Overlay) {
        self.overlay = overlay
        // the thread keeps this object for the life of the daemon
        DetachedThread.start { self.run() }
    }

    /// Announces the subdirectories of `listing`, in the order a walk will list them. The
    /// directory listed (at `listed` in its parent) needs no reading ahead any more.
    func announce(subdirectoriesOf listing: DirectoryListing, listed: (parent: NodeID, name: [UInt8])?) {
        let names = listing.items.dropFirst(2).filter { $0.type == UInt8(DT_DIR) }.map(listing.name)
        mutex.withLock { _ in
            if let listed, let index = pending.lastIndex(where: { $0.parent == listed.parent && $0.name == listed.name }) {
                pending.remove(at: index)
            }
            pending.append(contentsOf: names.reversed().map { (listing.node, $0) })
            if pending.count > Self.limit { pending.removeFirst(pending.count - Self.limit) }
        }
        condition.signal()
    }

    /// Notes that `thread` opened the file `node` of directory `parent` for reading. A program
    /// that opens a second file in a row in one directory reads its files in turn (`cat *`,
    /// `cp -r`, `tar`, `grep -r`): the files that follow in listing order are read ahead, 16 of
    /// them, asked again every eighth open, so that 8 to 16 are always on their way. Once it
    /// has, its first open in the next directory asks already. Where the file that would ask
    /// first (open as `fd`) is in the page cache already, the directory's files are taken to
    /// be too, and nothing is asked for them, unless they were being read ahead (for another
    /// reader: `xargs cat` starts a process every few hundred files).
    func noteOpen(thread: pid_t, parent: NodeID, node: NodeID, fd: Int32) {
        if mutex.withLock({ _ in noteOpenHeld(thread: thread, parent: parent, node: node, fd: fd) }) { condition.signal() }
    }

    /// `noteOpen` with the mutex held; true when a request was added.
    private func noteOpenHeld(thread: pid_t, parent: NodeID, node: NodeID, fd: Int32) -> Bool {
        var run = 1
        var cached = false
        var before: NodeID? = nil
        if let index = opens.firstIndex(where: { $0.thread == thread }) {
            let previous = opens[index]
            if previous.parent == parent {
                run = previous.run + 1
                cached = previous.cached
                before = previous.last
            } else if previous.run >= 2 {
                // it read its last directory in turn: it starts this one as if on a second file
                run = 2
            }
            opens.remove(at: index)
        }
        if run == 2 { cached = !readAheadIn.contains(parent) && pb_cached_pages(fd, UInt64(Self.fileBytes)) > 0 }
        opens.append((thread, parent, run, cached, node))
        if opens.count > 16 { opens.removeFirst() }
        guard run >= 2, (run - 2) % (Self.filesAhead / 2) == 0, !cached else { return false }
        fileRequests.append((thread, parent, node, before))
        if fileRequests.count > 8 { fileRequests.removeFirst() }
        return true
    }

    /// Directories and files read ahead so far, and the requests waiting or in progress
    /// (none once the thread has done all it was asked), for `.stats`.
    var figures: (directories: UInt64, files: UInt64, pending: Int) {
        mutex.withLock { working in (count, filesRead, pending.count + fileRequests.count + working) }
    }

    private func run() {
        // on Linux, 0 means this thread alone
        setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        while true {
            let next = mutex.withLock(when: { _ in !pending.isEmpty || !fileRequests.isEmpty }, on: condition) { working in
                working = 1
                if let file = fileRequests.popLast() { return Job.file(file) }
                count += 1
                return Job.directory(pending.removeLast())
            }
            switch next {
            case .file(let file):
                let read = readFilesAhead(for: file)
                mutex.withLock { working in
                    working = 0
                    filesRead += UInt64(read)
                    if read > 0 && readAheadIn.last != file.parent {
                        readAheadIn.removeAll { $0 == file.parent }
                        readAheadIn.append(file.parent)
                        if readAheadIn.count > 16 { readAheadIn.removeFirst() }
                    }
                }
            case .directory(let directory):
                overlay.warmSubdirectory(Request(overlay), directory.name, of: directory.parent)
                mutex.withLock { $0 = 0 }
            }
        }
    }

    /// What the read-ahead thread takes next.
    private enum Job {
        case file((thread: pid_t, parent: NodeID, node: NodeID, previous: NodeID?))
        case directory((parent: NodeID, name: [UInt8]))
    }

    /// Reads ahead the files after the one `file` asks for, if it is still where it was
    /// opened; returns how many.
    private func readFilesAhead(for file: (thread: pid_t, parent: NodeID, node: NodeID, previous: NodeID?)) -> Int {
        // its name now (a path built for one open in eight, not for each)
        let request = Request(overlay)
        guard let place = overlay.place(request, of: file.node), place.parent == file.parent else { return 0 }
        let previous = file.previous.flatMap { overlay.place(request, of: $0) }.flatMap { $0.parent == file.parent ? $0.name : nil }
        return readFilesAhead(after: place.name, previous: previous, in: file.parent, thread: file.thread, request)
    }

    /// Reads ahead the files that follow `name` in `parent`, in the order `thread` opens them
    /// (told by the file it opened before, `previous`, or as it was last seen); returns how
    /// many.
    private func readFilesAhead(after name: [UInt8], previous: [UInt8]?, in parent: NodeID, thread: pid_t,
                                _ request: Request) -> Int {
        if order?.parent != parent { order = FileOrder(of: parent, in: overlay, request) }
        guard var current = order else { return 0 }
        var before = previous.flatMap { current.index(of: $0) }
        var found = current.index(of: name)
        if found == nil, let relisted = FileOrder(of: parent, in: overlay, request) {
            // the directory changed since it was listed here
            current = relisted
            order = relisted
            before = previous.flatMap { relisted.index(of: $0) }
            found = relisted.index(of: name)
        }
        guard let index = found else { return 0 }
        var seen = orders.last(where: { $0.thread == thread })?.order ?? .listing
        if let before {
            seen = current.order(from: before, to: index)
            orders.removeAll { $0.thread == thread }
            orders.append((thread, seen))
            if orders.count > 16 { orders.removeFirst() }
        }
        switch seen {
        case .listing: return readAhead(current, listingFrom: index)
        case .names: return readAhead(current, namesFrom: index)
        case .unknown: return 0
        }
    }

    /// Reads ahead the files after listing index `index` in listing order.
    private func readAhead(_ current: FileOrder, listingFrom index: Int) -> Int {
        guard !current.isDone else { return 0 }
        let last = min(index + Self.filesAhead, current.items.count - 1)
        let first = max(current.readThrough + 1, index + 1)
        current.readThrough = max(current.readThrough, last)
        guard first <= last else { return 0 }
        return readAhead(current.items[first ... last].map { $0 }, of: current)
    }

    /// Reads ahead the files after the one at listing index `index` in name order.
    private func readAhead(_ current: FileOrder, namesFrom index: Int) -> Int {
        guard let place = current.placeByName(of: index) else { return 0 }
        let files = current.filesByName
        let last = min(place + Self.filesAhead, files.count - 1)
        let first = max(current.readThroughByName + 1, place + 1)
        current.readThroughByName = max(current.readThroughByName, last)
        guard first <= last else { return 0 }
        return readAhead(files[first ... last].map { current.items[$0.index] }, of: current)
    }

    /// Reads ahead `items` of `current`'s listing, in turn; returns how many were started.
    private func readAhead(_ items: [DirectoryListing.Item], of current: FileOrder) -> Int {
        var read = 0
        for item in items {
            switch current.listing.readAhead(item, limit: Self.fileBytes) {
            case .started:
                read += 1
            case .cached, .skipped:
                // a file the program has read already (this thread fell behind it), or one that
                // was in the page cache before (a directory found so is left alone at its
                // second open: see noteOpen)
                break
            }
        }
        return read
    }
}
