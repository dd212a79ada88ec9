#if canImport(Glibc)
import Glibc
#endif

/// `proxybundle pull`: skopeo copies the image into the store's layout, then each layer not
/// yet in the store is checked and extracted once.
public struct Pull {
    public let store: Store
    public var skopeo = Skopeo()
    public var limits = ExtractLimits()
    /// Progress lines (a terminal's), or nothing.
    public var progress: (String) -> Void = { _ in }
    /// The caller holds the store's lock (see `Store.lock`).
    public var lockHeld = false

    public init(store: Store) { self.store = store }

    public func pull(_ reference: String) throws -> PulledImage {
        try store.prepare()
        let lock = lockHeld ? -1 : try store.lock()
        defer { if lock >= 0 { close(lock) } }
        store.clearWork()
        let tag = Store.tag(for: reference)
        try skopeo.copy(from: Skopeo.source(reference), to: "oci:\(store.layout.path):\(tag)")
        let image = try store.layout.image(tag: tag)
        for (number, layer) in image.layers.enumerated() {
            let name = "layer \(number + 1)/\(image.layers.count) \(layer.diffID.prefix(19))"
            if store.layerExists(layer.diffID) {
                progress("\(name): already in the store")
                continue
            }
            let started = Pull.now()
            let result = try LayerExtraction.extract(blob: try store.layout.blobPath(layer.digest), layer: layer,
                                                     to: store.layerPath(layer.diffID), work: store.work, limits: limits)
            let seconds = max(Pull.now() - started, 0.001)
            progress("\(name): extracted \(result.bytes) bytes in \(Int(seconds * 1000)) ms "
                         + "(\(Int(Double(result.bytes) / seconds / 1_000_000)) MB/s)"
                         + (result.dropped > 0 ? ", \(result.dropped) device or FIFO entries dropped" : ""))
        }
        let pulled = PulledImage(reference: reference, manifestDigest: image.manifestDigest, diffIDs: image.layers.map(\.diffID))
        try store.record(pulled)
        return pulled
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
