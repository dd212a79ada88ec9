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
    /// The policy skopeo applies (given to it as --policy) and that the signatures it read are
    /// checked against again before they are kept; nil: skopeo's own, and none kept.
    public var trust: Trust?

    public init(store: Store) { self.store = store }

    public func pull(_ reference: String) throws -> PulledImage {
        try store.prepare()
        let lock = lockHeld ? -1 : try store.lock()
        defer { if lock >= 0 { close(lock) } }
        store.clearWork()
        let tag = Store.tag(for: reference), source = Skopeo.source(reference)
        var skopeo = self.skopeo
        if let trust { skopeo.policy = trust.policy.path }
        try RemoteManifest.check(source, skopeo: skopeo)
        let demanded = trust?.demandsSignatures(source) ?? false
        // the registry's own digest of what the reference names, for a later switch that finds
        // it unchanged (see `Pull.unchanged`); not for the other transports
        let registryDigest = source.hasPrefix("docker://") ? try? skopeo.manifestDigest(source) : nil
        let locations = try skopeo.copy(from: source, to: "oci:\(store.layout.path):\(tag)", signatureLocations: demanded)
        let image = try store.layout.image(tag: tag)
        let verified = try verify(source, image: image, locations: locations)
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
        var pulled = PulledImage(reference: reference, manifestDigest: image.manifestDigest, diffIDs: image.layers.map(\.diffID))
        pulled.signers = verified.signers
        if verified.digest != image.manifestDigest { pulled.signedDigest = verified.digest }
        // the tag may have moved between the two requests: kept only when both name one manifest
        if registryDigest == verified.digest { pulled.registryDigest = registryDigest }
        try store.record(pulled)
        return pulled
    }

    /// The signatures skopeo verified, read again from where it read them, checked against
    /// the policy once more and kept in the store (before any layer is extracted): who signed,
    /// and the manifest digest they are for.
    private func verify(_ source: String, image: ImageLayout.Image, locations: [String]) throws
        -> (signers: [String], digest: String) {
        guard let trust else { return ([], image.manifestDigest) }
        let refused = { (reason: String) in DeliveryError("refused by the policy \(trust.policy.path): \(reason)") }
        guard trust.demandsSignatures(source) else {
            do { return (try trust.check(source, digest: image.manifestDigest, signatures: []), image.manifestDigest) } catch {
                throw refused(error.description)
            }
        }
        let digests = Set(locations.compactMap(Signatures.digest))
        guard let digest = digests.first, digests.count == 1 else {
            throw refused("skopeo accepted its signatures but its log does not say where it read them "
                              + "(proxybundle reads skopeo 1.9's debug lines)")
        }
        let signatures = Signatures(store: store)
        let fetched = try signatures.fetch(locations, tlsVerify: skopeo.tlsVerify)
        do {
            let signers = try trust.check(source, digest: digest, signatures: fetched.files)
            try signatures.keep(fetched.directory, for: digest)
            return (signers, digest)
        } catch let error as Trust.Refusal {
            try? Tree.remove(path: fetched.directory)
            throw refused(error.description)
        } catch {
            try? Tree.remove(path: fetched.directory)
            throw error
        }
    }

    /// The image `reference` names, already in the store, when the registry still has the
    /// manifest it was pulled as and its kept signatures pass the policy in force: a switch to
    /// it needs no copy (nor skopeo's own signature check). Nil: pull it.
    public func unchanged(_ reference: String) -> PulledImage? {
        guard var recorded = store.recorded(reference), let digest = recorded.registryDigest, let trust,
              recorded.diffIDs.allSatisfy(store.layerExists),
              (try? skopeo.manifestDigest(Skopeo.source(reference))) == digest,
              let signers = try? trust.check(recorded, in: store) else { return nil }
        recorded.signers = signers
        return recorded
    }

    static func seconds(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10) s"
    }
}
