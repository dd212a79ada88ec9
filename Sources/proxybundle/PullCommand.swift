import ArgumentParser
import ProxyBundleDelivery
#if canImport(Glibc)
import Glibc
#endif

struct PullCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pull",
        abstract: "Fetch an OCI image into the store and extract each of its layers once.",
        discussion: """
            skopeo copies the image into the store's OCI image layout (blobs already there are \
            not fetched again), so registries.conf, auth files, policy.json and TLS settings \
            apply as for any container tool. The policy is --policy, else STORE/policy.json, \
            else skopeo's ($HOME/.config/containers/policy.json, /etc/containers/policy.json); \
            skopeo refuses an image it does not accept before any blob is written (one line: \
            the image and why). The signatures it verified (GPG simple signing, read from the \
            signature store registries.d names for the registry) are checked again and kept in \
            the store, for switches made without the registry. An image the policy accepts \
            without a signature is said to be unverified, once, on standard error. \
            Each layer blob is then checked against its \
            digest and extracted once into STORE/layers/sha256/DIFFID (tar, tar+gzip or \
            tar+zstd; safely: nothing outside the layer's directory is written). Prints the \
            layer directories, top first: the patches of the image, for `layers --set`. \
            When standard error is a terminal, skopeo shows the transfer there, then a status \
            line rewritten in place shows each layer's check and extraction (bytes, entries, \
            rate); otherwise only errors are written there.
            REF is a registry reference (host/repo:tag) or any skopeo transport (oci:DIR:TAG).
            Example:
              proxybundle pull registry.example.com/myapp-patch:v2
            """
    )

    @Argument(help: "The image: host/repository:tag, or a skopeo transport such as oci:DIR:TAG.")
    var reference: String

    @OptionGroup var store: StoreOptions

    @OptionGroup var registry: RegistryOptions

    @OptionGroup var limits: ExtractOptions

    func run() throws {
        let pulled = try store.pull(reference, registry: registry, limits: limits)
        for diffID in pulled.diffIDs.reversed() { print(store.store.layerPath(diffID)) }
    }
}

/// `--store DIR`, shared by the commands that use the store.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store (default: /var/lib/proxybundle as root, ~/.local/share/proxybundle otherwise).", valueName: "dir"))
    var directory: String?

    var store: Store { Store(root: directory.map { $0.hasSuffix("/") && $0.count > 1 ? String($0.dropLast()) : $0 } ?? Store.defaultRoot) }

    /// Pulls `reference`; with `unlessUnchanged`, an image in the store whose manifest the
    /// registry still serves is taken as it is, its kept signatures checked (see `Pull.unchanged`).
    func pull(_ reference: String, registry: RegistryOptions, limits: ExtractOptions, lockHeld: Bool = false,
              unlessUnchanged: Bool = false) throws(Failure) -> PulledImage {
        var pull = Pull(store: store)
        pull.lockHeld = lockHeld
        pull.skopeo = registry.skopeo
        pull.limits = limits.limits
        pull.progress = Progress.terminal()
        pull.trust = try trust(registry, naming: reference)
        let pulled: PulledImage
        do { pulled = try (unlessUnchanged ? pull.unchanged(reference) : nil) ?? pull.pull(reference) } catch let error as DeliveryError {
            throw Failure(text: "\(reference): \(error.description)")
        } catch {
            throw Failure(text: "\(reference): \(error)")
        }
        if pulled.signers.isEmpty {
            Failure(text: "\(reference): unverified: the policy \(pull.trust?.policy.path ?? "") accepts it without a signature").report()
        }
        return pulled
    }

    /// The policy the store's commands apply: --policy, else STORE/policy.json, else skopeo's.
    func trust(_ registry: RegistryOptions, naming image: String) throws(Failure) -> Trust {
        do { return Trust(policy: try Policy(path: Policy.path(given: registry.policy, store: store))) } catch {
            throw Failure(text: "\(image): \(error)")
        }
    }

    /// Checks `image`, already in the store, again against the policy and the signatures kept
    /// for it (no registry asked); returns who signed it.
    func verify(_ image: PulledImage, registry: RegistryOptions) throws(Failure) -> [String] {
        let trust = try trust(registry, naming: image.reference)
        do { return try trust.check(image, in: store) } catch {
            throw Failure(text: "\(image.reference): refused by the policy \(trust.policy.path): \(error)")
        }
    }

    /// Runs `body` with the store made and its lock held.
    func locked<T>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
        let lock: Int32
        do {
            try store.prepare()
            lock = try store.lock()
        } catch { throw Failure(text: "\(error)") }
        defer { close(lock) }
        return try body()
    }
}

/// How skopeo reaches a registry.
struct RegistryOptions: ParsableArguments {
    @Option(name: .customLong("tls-verify"), help: ArgumentHelp(
        "Require HTTPS and a verified certificate (false: plain HTTP or any certificate).", valueName: "bool"))
    var tlsVerify = true

    @Option(help: ArgumentHelp(
        "A containers-policy.json that decides which images are trusted (default: STORE/policy.json, else skopeo's).",
        valueName: "file"))
    var policy: String?

    @Option(name: .customLong("registries.d"), help: ArgumentHelp(
        "The registries.d directory naming each registry's signature store (default: skopeo's).", valueName: "dir"))
    var registriesDirectory: String?

    @Option(help: ArgumentHelp("The registry credentials (as REGISTRY_AUTH_FILE).", valueName: "file"))
    var authfile: String?

    @Option(name: .customLong("cert-dir"), help: ArgumentHelp(
        "CA certificates (*.crt) for the registry (default: /etc/containers/certs.d/HOST:PORT).", valueName: "dir"))
    var certDirectory: String?

    var skopeo: Skopeo {
        var skopeo = Skopeo()
        skopeo.tlsVerify = tlsVerify
        skopeo.policy = policy
        skopeo.authfile = authfile
        skopeo.certDirectory = certDirectory
        skopeo.registriesDirectory = registriesDirectory
        skopeo.showProgress = isatty(2) != 0
        return skopeo
    }
}

/// What an untrusted layer may hold.
struct ExtractOptions: ParsableArguments {
    @Option(name: .customLong("max-size"), help: ArgumentHelp(
        "The largest uncompressed layer accepted, in bytes (default 16 GiB).", valueName: "bytes"))
    var maxSize: UInt64 = ExtractLimits().maxBytes

    @Option(name: .customLong("max-entries"), help: ArgumentHelp(
        "The most entries a layer may hold (default 1000000).", valueName: "n"))
    var maxEntries: Int = ExtractLimits().maxEntries

    @Flag(name: .customLong("allow-special"), help: "Keep device nodes, FIFOs and set-user/group-ID bits (as root only).")
    var allowSpecial = false

    func validate() throws {
        if allowSpecial && geteuid() != 0 { throw ValidationError("--allow-special is for root only: as another user a layer's devices and set-ID bits are always dropped") }
    }

    var limits: ExtractLimits {
        var limits = ExtractLimits()
        limits.maxBytes = maxSize
        limits.maxEntries = maxEntries
        limits.allowSpecial = allowSpecial
        return limits
    }
}
