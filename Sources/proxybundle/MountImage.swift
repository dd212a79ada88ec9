import ProxyBundleCore
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

/// `mount -o image=REF`: the image's layers as patches, from the store when it holds them
/// (a machine boots offline), pulled otherwise. The image goes into the mountpoint's history
/// (when it is not already the current entry), which keeps its layers from `gc` and lets
/// `layers --rollback` go back from it.
enum MountImage {
    static func patches(_ reference: String, store directory: String?, mountpoint: RawPath) throws(Failure) -> [RawPath] {
        let options: StoreOptions
        do { options = try StoreOptions.parse(directory.map { ["--store", $0] } ?? []) } catch {
            throw Failure(text: "store=\(directory ?? ""): \(StoreOptions.message(for: error))")
        }
        let store = options.store
        return try options.locked { () throws(Failure) in
            var image: PulledImage
            if var recorded = store.recorded(reference), recorded.diffIDs.allSatisfy(store.layerExists) {
                // offline (at boot): the policy in force, against the signatures kept at the pull
                recorded.signers = try options.verify(recorded, registry: RegistryOptions.standard)
                image = recorded
            } else {
                image = try options.pull(reference, registry: RegistryOptions.standard, limits: ExtractOptions.standard, lockHeld: true)
            }
            var history = History(store: store, mountpoint: Paths.resolved(mountpoint).bytes)
            if history.setCurrent(image) {
                do { try history.save() } catch { throw Failure(text: "\(reference): \(error)") }
            }
            return image.diffIDs.reversed().map { RawPath(store.layerPath($0)) }
        }
    }
}

extension RegistryOptions {
    /// The defaults, as an option group parsed from nothing.
    // swift-argument-parser's groups hold their defaults only once parsed
    static var standard: RegistryOptions { (try? RegistryOptions.parse([])) ?? RegistryOptions() }
}

extension ExtractOptions {
    static var standard: ExtractOptions { (try? ExtractOptions.parse([])) ?? ExtractOptions() }
}
