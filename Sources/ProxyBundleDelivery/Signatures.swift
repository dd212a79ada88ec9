#if canImport(Glibc)
import Glibc
#endif

/// The signatures a store keeps, per manifest digest: `signatures/HEX/signature-N`, as read
/// from the registry's lookaside signature store when the image was pulled and verified, so a
/// switch without the registry (`--rollback`, a mount of an image from the store) checks them
/// again against the policy in force.
public struct Signatures {
    public let store: Store

    public init(store: Store) { self.store = store }

    var directory: String { store.root + "/signatures" }

    /// The signature files kept for `digest`, in order.
    public func files(for digest: String) -> [String] {
        guard let hex = ImageLayout.hex(of: digest) else { return [] }
        let path = directory + "/" + hex
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        let names = ((try? Tree.names(fd)) ?? []).map { String(decoding: $0, as: UTF8.self) }
        return names.compactMap { name in Signatures.number(name).map { ($0, path + "/" + name) } }.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// N of a location ending in `/signature-N` (or of the name `signature-N`).
    static func number(_ location: String) -> Int? {
        let name = location.split(separator: "/").last ?? ""
        guard name.hasPrefix("signature-") else { return nil }
        return Int(name.dropFirst("signature-".count))
    }

    /// The manifest digest of a lookaside location: `.../REPO@sha256=HEX/signature-N`.
    static func digest(_ location: String) -> String? {
        let parts = location.split(separator: "/")
        guard parts.count >= 2, let at = parts[parts.count - 2].lastIndex(of: "@") else { return nil }
        let tail = parts[parts.count - 2][parts[parts.count - 2].index(after: at)...]
        guard tail.hasPrefix("sha256=") else { return nil }
        let digest = "sha256:" + tail.dropFirst("sha256=".count)
        return ImageLayout.hex(of: digest) != nil ? digest : nil
    }

    /// Copies the signatures at `locations` (http(s) URLs, fetched by curl; file paths, read)
    /// into a new directory of the store, `signature-1`...; returns it and its files.
    func fetch(_ locations: [String], tlsVerify: Bool) throws -> (directory: String, files: [String]) {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw DeliveryError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let temporary = directory + "/.fetch-\(getpid())"
        try? Tree.remove(path: temporary)
        guard mkdir(temporary, 0o755) == 0 else { throw DeliveryError("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        do {
            var files: [String] = [], urls: [String] = []
            for (index, location) in locations.enumerated() {
                let file = temporary + "/signature-\(index + 1)"
                files.append(file)
                if location.hasPrefix("/") {
                    try Store.writeAtomically(file, try ImageLayout.read(location, limit: 1 << 20))
                } else {
                    urls += [location, "--output", file]
                }
            }
            if !urls.isEmpty {
                let arguments = ["--fail", "--silent", "--show-error", "--proto", "=http,https", "--max-filesize", "1048576",
                                 "--max-time", "60"] + (tlsVerify ? [] : ["--insecure"]) + urls
                let (status, message) = try ChildProcess("curl", arguments).wait()
                guard status == 0 else { throw DeliveryError("cannot fetch its signatures: \(message)") }
            }
            return (temporary, files)
        } catch {
            try? Tree.remove(path: temporary)
            throw error
        }
    }

    /// Makes the signatures fetched into `fetched` those kept for `digest` (the store's lock held).
    func keep(_ fetched: String, for digest: String) throws {
        guard let hex = ImageLayout.hex(of: digest) else { throw DeliveryError("\(digest) is not a sha256 digest") }
        let path = directory + "/" + hex
        try? Tree.remove(path: path)
        guard rename(fetched, path) == 0 else {
            throw DeliveryError("cannot keep the signatures in \(path): \(String(cString: strerror(errno)))")
        }
        try LayerExtraction.syncDirectory(parentOf: path)
    }
}

extension Trust {
    /// Checks an image already in the store again, offline: the signatures kept for it against
    /// this policy. Returns who signed it (none: accepted without a signature).
    public func check(_ image: PulledImage, in store: Store) throws(Refusal) -> [String] {
        try check(Skopeo.source(image.reference), digest: image.signatureDigest,
                  signatures: Signatures(store: store).files(for: image.signatureDigest))
    }
}
