import ProxyBundleCore
import ProxyBundleDelivery

/// The images a mount's patches came from, for `status`: a patch that is a store's layer
/// directory is named by the mountpoint's current history entry when that holds it, else by
/// an image pulled into that store that does.
struct PatchImage {
    var reference: String
    var manifest: String
    /// The keys that verified it when it was set or pulled (none: unverified).
    var signers: [String]
    /// Its layers among the mount's patches, top first.
    var patches: [RawPath]

    static func of(_ mount: RunningMount) -> [PatchImage] {
        var found: [PatchImage] = []
        var candidates: [String: [PulledImage]] = [:]
        for patch in mount.patches {
            guard let (store, diffID) = Store.owning(layer: patch.bytes) else { continue }
            let images = candidates[store.root] ?? {
                let history = History(store: store, mountpoint: mount.mountpoint.bytes)
                let current = history.current.map { [history.entries[$0].image] } ?? []
                return current + store.records()
            }()
            candidates[store.root] = images
            guard let image = images.first(where: { $0.diffIDs.contains(diffID) }) else { continue }
            if let index = found.firstIndex(where: { $0.manifest == image.manifestDigest && $0.reference == image.reference }) {
                found[index].patches.append(patch)
            } else {
                found.append(PatchImage(reference: image.reference, manifest: image.manifestDigest, signers: image.signers,
                                        patches: [patch]))
            }
        }
        return found
    }

    /// `signed by KEY`, or `unverified`.
    var verification: String { PulledImage.verification(signers) }
}
