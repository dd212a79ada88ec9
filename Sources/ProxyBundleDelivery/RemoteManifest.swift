#if canImport(Glibc)
import Glibc
#endif

/// Limits before work: the manifest a registry serves is read first (`skopeo inspect --raw`,
/// which fetches manifests only), and an image whose manifest lists more layers than a mount
/// can stack is refused before a blob is fetched. Without this, a crafted manifest of 100,000
/// layers kept skopeo copying for minutes before the layout reader could say no.
public enum RemoteManifest {
    /// The most layers an image may have: a mount's most patches (`LayerList.patchLimit`; the
    /// delivery code does not link the overlay core).
    public static let maxLayers = 10_000
    /// The largest manifest read, as `ImageLayout` reads one from the layout.
    public static let maxSize = 4 << 20

    /// What a manifest document is: an image's manifest and its number of layers, or an
    /// index and the digest of the manifest chosen from it (linux/amd64, or its only entry).
    public enum Contents: Equatable, Sendable {
        case image(layers: Int)
        case index(chosen: String)
    }

    /// Reads a manifest or an index (any bytes: it comes from the registry) of `source`.
    public static func contents(of bytes: [UInt8], source: String = "") throws -> Contents {
        let document: JSON
        do { document = try JSON.parse(bytes) } catch { throw DeliveryError("its manifest is \(error)") }
        if let layers = document["layers"]?.array { return .image(layers: layers.count) }
        guard let entries = document["manifests"]?.array else { throw DeliveryError("its manifest lists neither layers nor manifests") }
        let chosen = try ImageLayout.choose(entries, index: source)
        guard let digest = chosen["digest"]?.string, ImageLayout.hex(of: digest) != nil else {
            throw DeliveryError("its image index names a manifest without a sha256 digest")
        }
        return .index(chosen: digest)
    }

    /// Refuses `source` (as skopeo names it) when its manifest, or the one its index leads to,
    /// lists more than `maxLayers` layers.
    public static func check(_ source: String, skopeo: Skopeo) throws {
        var contents = try contents(of: try skopeo.rawManifest(of: source, limit: maxSize), source: source)
        if case .index(let digest) = contents, let pinned = Skopeo.pinned(source, to: digest) {
            contents = try RemoteManifest.contents(of: try skopeo.rawManifest(of: pinned, limit: maxSize), source: pinned)
        }
        if case .image(let layers) = contents, layers > maxLayers {
            throw DeliveryError("the image has \(layers) layers, more than a mount can stack (\(maxLayers)); nothing was fetched")
        }
    }
}

extension Skopeo {
    /// The manifest of `source` as its registry serves it (skopeo inspect --raw: no blob is
    /// fetched), up to `limit` bytes; a failure is one line naming the source.
    public func rawManifest(of source: String, limit: Int) throws -> [UInt8] {
        var arguments = ["inspect", "--raw"]
        if !tlsVerify { arguments.append("--tls-verify=false") }
        if let authfile { arguments += ["--authfile", authfile] }
        if let certDirectory { arguments += ["--cert-dir", certDirectory] }
        arguments.append(source)
        let child = try ChildProcess("skopeo", arguments, captureOutput: true)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while bytes.count <= limit {
            let n = read(child.output, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
        }
        if bytes.count > limit {
            child.stop()
            throw DeliveryError("the manifest of \(source) is larger than \(limit) bytes")
        }
        let (status, message) = child.wait()
        guard status == 0 else { throw DeliveryError("skopeo could not read the manifest of \(source): \(Skopeo.message(message))") }
        return bytes
    }

    /// A registry source (`docker://HOST/NAME:TAG` or `...@DIGEST`) pinned to `digest`; nil for
    /// another transport.
    static func pinned(_ source: String, to digest: String) -> String? {
        guard source.hasPrefix("docker://") else { return nil }
        var name = Substring(source.dropFirst("docker://".count))
        if let at = name.firstIndex(of: "@") {
            name = name[..<at]
        } else if let colon = name.lastIndex(of: ":"), !name[colon...].contains("/") {
            name = name[..<colon]
        }
        return "docker://\(name)@\(digest)"
    }
}
