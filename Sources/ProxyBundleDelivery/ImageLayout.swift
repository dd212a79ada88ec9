#if canImport(Glibc)
import Glibc
#endif

/// An OCI image layout directory (`oci-layout`, `index.json`, `blobs/sha256/HEX`) as skopeo
/// writes it: read, with every blob checked against its digest.
public struct ImageLayout {
    public let path: String

    public init(path: String) { self.path = path }

    /// One layer of an image: its blob as stored (compressed) and its diff-id (the digest of
    /// the uncompressed tar), both `sha256:HEX`.
    public struct Layer: Equatable, Sendable {
        public let digest: String
        public let mediaType: String
        public let diffID: String
    }

    public struct Image: Sendable {
        public let manifestDigest: String
        public let configDigest: String
        /// Every blob the image was read from: indexes on the way, manifest, config, layers.
        public var blobs: Set<String> = []
        /// Bottom first, as the manifest lists them.
        public let layers: [Layer]
    }

    static let indexTypes = ["application/vnd.oci.image.index.v1+json",
                             "application/vnd.docker.distribution.manifest.list.v2+json"]
    static let manifestTypes = ["application/vnd.oci.image.manifest.v1+json",
                                "application/vnd.docker.distribution.manifest.v2+json"]

    public func blobPath(_ digest: String) throws -> String {
        guard let hex = ImageLayout.hex(of: digest) else { throw DeliveryError("\(digest) is not a sha256 digest") }
        return path + "/blobs/sha256/" + hex
    }

    /// The 64 hex digits of a `sha256:` digest, or nil for anything else.
    public static func hex(of digest: String) -> String? {
        guard digest.hasPrefix("sha256:") else { return nil }
        let hex = digest.dropFirst(7)
        guard hex.count == 64, hex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        return String(hex)
    }

    /// The image tagged `tag` in index.json (an index in it resolved to linux/amd64, or to
    /// its one entry).
    public func image(tag: String) throws -> Image {
        let index = try json(file: path + "/index.json", what: "the image layout's index.json")
        guard let entry = index["manifests"]?.array?.last(where: { $0["annotations"]?["org.opencontainers.image.ref.name"]?.string == tag })
        else { throw DeliveryError("the image layout \(path) has no image tagged \(tag)") }
        return try image(descriptor: entry, depth: 0)
    }

    private func image(descriptor: JSON, depth: Int) throws -> Image {
        guard let digest = descriptor["digest"]?.string, depth < 4 else { throw DeliveryError("an image descriptor has no digest") }
        let document = try json(blob: digest)
        let mediaType = document["mediaType"]?.string ?? descriptor["mediaType"]?.string ?? ""
        if ImageLayout.indexTypes.contains(mediaType) || (document["manifests"] != nil && document["layers"] == nil) {
            var chosen = try image(descriptor: try ImageLayout.choose(document["manifests"]?.array ?? [], index: digest), depth: depth + 1)
            chosen.blobs.insert(digest)
            return chosen
        }
        guard ImageLayout.manifestTypes.contains(mediaType) || (mediaType.isEmpty && document["layers"] != nil) else {
            throw DeliveryError("manifest \(digest) has the media type '\(mediaType)', which is not an image manifest")
        }
        guard let configDigest = document["config"]?["digest"]?.string, let layers = document["layers"]?.array else {
            throw DeliveryError("manifest \(digest) has no config or no layers")
        }
        let config = try json(blob: configDigest)
        let diffIDs = config["rootfs"]?["diff_ids"]?.array?.compactMap(\.string) ?? []
        guard diffIDs.count == layers.count else {
            throw DeliveryError("the config of manifest \(digest) lists \(diffIDs.count) diff-ids for \(layers.count) layers")
        }
        let found = try zip(layers, diffIDs).map { layer, diffID in
            guard let blob = layer["digest"]?.string, ImageLayout.hex(of: blob) != nil, ImageLayout.hex(of: diffID) != nil else {
                throw DeliveryError("a layer of manifest \(digest) has no sha256 digest or diff-id")
            }
            return Layer(digest: blob, mediaType: layer["mediaType"]?.string ?? "", diffID: diffID)
        }
        return Image(manifestDigest: digest, configDigest: configDigest, blobs: Set([digest, configDigest] + found.map(\.digest)),
                     layers: found)
    }

    /// The entry for linux/amd64, or the only entry.
    static func choose(_ entries: [JSON], index: String) throws -> JSON {
        if entries.count == 1 { return entries[0] }
        if let match = entries.first(where: {
            $0["platform"]?["os"]?.string == "linux" && $0["platform"]?["architecture"]?.string == "amd64"
        }) { return match }
        throw DeliveryError("the image index \(index) has no linux/amd64 entry among \(entries.count)")
    }

    /// A small blob (manifest, config) read whole, checked against its digest, and parsed.
    func json(blob digest: String) throws -> JSON {
        let bytes = try ImageLayout.read(try blobPath(digest), limit: 4 << 20)
        guard "sha256:" + SHA256.hex(bytes) == digest else { throw DeliveryError("blob \(digest) does not match its digest") }
        do { return try JSON.parse(bytes) } catch { throw DeliveryError("blob \(digest) is \(error)") }
    }

    func json(file: String, what: String) throws -> JSON {
        do { return try JSON.parse(try ImageLayout.read(file, limit: 16 << 20)) } catch let error as JSON.ParseError {
            throw DeliveryError("\(what) is \(error)")
        }
    }

    static func read(_ file: String, limit: Int) throws -> [UInt8] {
        let fd = open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DeliveryError("cannot open \(file)", errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw DeliveryError("cannot read \(file)", errno: errno) }
            if n == 0 { return bytes }
            bytes.append(contentsOf: buffer[0..<n])
            if bytes.count > limit { throw DeliveryError("\(file) is larger than \(limit) bytes") }
        }
    }
}
