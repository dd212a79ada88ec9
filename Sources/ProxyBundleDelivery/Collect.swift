#if canImport(Glibc)
import Glibc
#endif

/// `gc`: removes the layers no live mount uses and no mountpoint's last `keep` history entries
/// name, the images (index entries, records) that need one of them, and the blobs no kept
/// image reaches. Runs with the store's lock held, so no pull or switch is under way.
public struct Collect {
    public let store: Store
    public var keep = 3

    public init(store: Store) { self.store = store }

    public struct Report: Sendable {
        public var layersRemoved = 0
        public var layersKept = 0
        public var blobsRemoved = 0
        public var bytesFreed: UInt64 = 0
    }

    /// `inUse`: the diff-ids of the layers live mounts use, asked once the lock is held (a
    /// mount switched while gc waited for it counts with its new layers).
    public func run(inUse: () throws -> Set<String>) throws -> Report {
        try store.prepare()
        let lock = try store.lock()
        defer { close(lock) }
        let inUseLock = try store.lockInUse()  // no mount starts with, or is set to, a layer meanwhile
        defer { close(inUseLock) }
        store.clearWork()
        var kept = try inUse()
        for history in histories() {
            for entry in history.entries.suffix(keep) { kept.formUnion(entry.image.diffIDs) }
        }
        var report = Report()
        let layers = open(store.layersDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard layers >= 0 else { throw DeliveryError("cannot open \(store.layersDirectory): \(String(cString: strerror(errno)))") }
        defer { close(layers) }
        for name in try Tree.names(layers) {
            if kept.contains("sha256:" + String(decoding: name, as: UTF8.self)) { report.layersKept += 1; continue }
            try Tree.remove(layers, name)
            report.layersRemoved += 1
        }
        try collectImages(kept: kept, report: &report)
        collectSignatures()
        return report
    }

    /// Drops the signatures of manifests no record and no history entry names any more.
    private func collectSignatures() {
        var named: Set<String> = []
        for image in store.records() { named.insert(image.signatureDigest) }
        for history in histories() { named.formUnion(history.entries.map(\.image.signatureDigest)) }
        let directory = Signatures(store: store).directory
        for name in (try? names(directory)) ?? [] where !named.contains("sha256:" + name) {
            try? Tree.remove(path: directory + "/" + name)
        }
    }

    /// Drops the index entries and records of images that lost a layer, then the blobs no kept
    /// entry reaches (none when an entry cannot be read: better kept than lost).
    private func collectImages(kept: Set<String>, report: inout Report) throws {
        let layout = store.layout
        var entries: [JSON] = []
        var reachable: Set<String> = []
        var readable = true
        for entry in try Export.entries(in: layout.path) {
            guard let tag = entry["annotations"]?[Export.refName]?.string, let image = try? layout.image(tag: tag) else {
                readable = false
                entries.append(entry)
                continue
            }
            guard image.layers.allSatisfy({ kept.contains($0.diffID) }) else { continue }
            entries.append(entry)
            reachable.formUnion(image.blobs)
        }
        try Export.writeIndex(entries, in: layout.path)
        for name in (try? names(store.root + "/images")) ?? [] {
            guard let bytes = try? ImageLayout.read(store.root + "/images/" + name, limit: 1 << 20),
                  let record = (try? JSON.parse(bytes)).flatMap(PulledImage.init(json:)),
                  !record.diffIDs.allSatisfy(kept.contains) else { continue }
            unlink(store.root + "/images/" + name)
        }
        guard readable else { return }
        let blobs = layout.path + "/blobs/sha256"
        for name in try names(blobs) where !reachable.contains("sha256:" + name) && !name.hasPrefix(".") {
            var st = stat()
            if stat(blobs + "/" + name, &st) == 0 { report.bytesFreed += UInt64(st.st_size) }
            if unlink(blobs + "/" + name) == 0 { report.blobsRemoved += 1 }
        }
    }

    private func histories() -> [History] {
        ((try? names(store.root + "/history")) ?? []).filter { !$0.contains(".tmp-") }.map {
            History(file: store.root + "/history/" + $0)
        }
    }

    private func names(_ path: String) throws -> [String] {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw DeliveryError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        return try Tree.names(fd).map { String(decoding: $0, as: UTF8.self) }
    }
}
