#if canImport(Glibc)
import Glibc
#endif

/// `proxybundle pull`: skopeo copies the image into the store's layout, then each layer not
/// yet in the store is checked and extracted once.
public struct Pull {
    public let store: Store
    public var skopeo = Skopeo()
    public var limits = ExtractLimits()
    /// A terminal's status line (see `Progress`), or nothing.
    public var progress = Progress(enabled: false)
    /// The caller holds the store's lock (see `Store.lock`).
    public var lockHeld = false

    public init(store: Store) { self.store = store }

    public func pull(_ reference: String) throws -> PulledImage {
        try store.prepare()
        let lock = lockHeld ? -1 : try store.lock()
        defer { if lock >= 0 { close(lock) } }
        store.clearWork()
        let tag = Store.tag(for: reference)
        try RemoteManifest.check(Skopeo.source(reference), skopeo: skopeo)
        try skopeo.copy(from: Skopeo.source(reference), to: "oci:\(store.layout.path):\(tag)")
        let image = try store.layout.image(tag: tag)
        defer { progress.clear() }  // a status line left by a failure, before its error line
        var extracted = 0, bytes: UInt64 = 0
        let started = Progress.now()
        for (number, layer) in image.layers.enumerated() {
            let name = "layer \(number + 1)/\(image.layers.count) \(layer.diffID.prefix(19))"
            if store.layerExists(layer.diffID) {
                progress.finish("\(name): already in the store")
                continue
            }
            let layerStarted = Progress.now()
            let result = try LayerExtraction.extract(blob: try store.layout.blobPath(layer.digest), layer: layer,
                                                     to: store.layerPath(layer.diffID), work: store.work, limits: limits,
                                                     progress: progress, label: name)
            let seconds = Progress.now() - layerStarted
            progress.finish("\(name): extracted \(Progress.size(result.bytes)) in \(Pull.seconds(seconds)) "
                                + "(\(Progress.rate(result.bytes, seconds)))"
                                + (result.dropped > 0 ? ", \(result.dropped) device or FIFO entries dropped" : ""))
            extracted += 1
            bytes += result.bytes
        }
        if extracted > 0 {
            let seconds = Progress.now() - started
            progress.finish("\(reference): \(extracted) of \(image.layers.count) layers extracted, \(Progress.size(bytes)) "
                                + "in \(Pull.seconds(seconds)) (\(Progress.rate(bytes, seconds)))")
        }
        let pulled = PulledImage(reference: reference, manifestDigest: image.manifestDigest, diffIDs: image.layers.map(\.diffID))
        try store.record(pulled)
        return pulled
    }

    static func seconds(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) s"
    }
}
