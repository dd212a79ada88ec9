#if canImport(Glibc)
import Glibc
#endif

/// `export` and `push`: a directory written as one tar+gzip layer (`gzip -n`, so the same
/// tree gives the same blob) into an OCI image layout, on top of a base image's layers when
/// one is given, and tagged in the layout's index.json.
public struct Export {
    public var reproducible = false
    public var skopeo = Skopeo()
    /// A terminal's status line while the layer is written, or nothing.
    public var progress = Progress(enabled: false)

    public init() {}

    static let layerType = "application/vnd.oci.image.layer.v1.tar+gzip"

    /// Writes `source` as an image tagged `tag` in the layout at `layout` (made if missing),
    /// over the image `base` (fetched into the layout first); returns the manifest's digest.
    public func export(_ source: String, layout path: String, tag: String, base: String? = nil) throws -> String {
        let layout = ImageLayout(path: path)
        try Export.prepare(path)
        var baseImage: ImageLayout.Image?
        var baseConfig = JSON.object([("architecture", .string("amd64")), ("os", .string("linux"))])
        if let base {
            let baseTag = "pb-base-" + String(SHA256.hex(Array(base.utf8)).prefix(16))
            try skopeo.copy(from: Skopeo.source(base), to: "oci:\(path):\(baseTag)")
            let image = try layout.image(tag: baseTag)
            baseConfig = try layout.json(blob: image.configDigest)
            baseImage = image
            try Export.untag(baseTag, in: path)
        }
        let (diffID, layer) = try writeLayer(source, into: layout)
        var layers: [JSON] = []
        for old in baseImage?.layers ?? [] {
            layers.append(Export.descriptor(old.mediaType, old.digest, try Export.size(try layout.blobPath(old.digest))))
        }
        layers.append(layer)
        let diffIDs = (baseImage?.layers.map(\.diffID) ?? []) + [diffID]
        let config = Export.replacing(baseConfig, "rootfs", .object([("type", .string("layers")),
                                                                      ("diff_ids", .array(diffIDs.map { .string($0) }))]))
        let configBlob = try Export.store(Array(config.text.utf8), in: layout)
        let manifest = JSON.object([
            ("schemaVersion", .number(2)), ("mediaType", .string("application/vnd.oci.image.manifest.v1+json")),
            ("config", Export.descriptor("application/vnd.oci.image.config.v1+json", configBlob.digest, configBlob.size)),
            ("layers", .array(layers)),
        ])
        let manifestBlob = try Export.store(Array(manifest.text.utf8), in: layout)
        try Export.tag(tag, Export.descriptor("application/vnd.oci.image.manifest.v1+json", manifestBlob.digest, manifestBlob.size),
                       in: path)
        return manifestBlob.digest
    }

    /// The layer: the tar streamed into `gzip -n` whose output is the blob, both hashed.
    private func writeLayer(_ source: String, into layout: ImageLayout) throws -> (diffID: String, descriptor: JSON) {
        let temporary = layout.path + "/blobs/sha256/.layer-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let blob = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard blob >= 0 else { throw DeliveryError("cannot create \(temporary)", errno: errno) }
        defer { close(blob) }
        do {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw DeliveryError("cannot make a pipe") }
            _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
            let gzip: ChildProcess
            do { gzip = try ChildProcess("gzip", ["-n", "-c"], input: ends[0], outputTo: blob) } catch {
                close(ends[0]); close(ends[1]); throw error
            }
            close(ends[0])
            let writer = TarWriter(fd: ends[1])
            let started = Progress.now()
            if progress.enabled {
                progress.update("\(source): writing the layer", force: true)
                writer.onWrite = { [progress, unowned writer] total in
                    guard progress.isDue else { return }
                    progress.update("\(source): writing the layer: \(Progress.size(total)), \(writer.entries) entries, "
                                        + Progress.rate(total, Progress.now() - started))
                }
            }
            var layerSource = LayerSource(reproducible: reproducible)
            signal(SIGPIPE, SIG_IGN)  // a gzip that failed (a full disk) is reported, not a signal's death
            do { try layerSource.write(source, to: writer) } catch {
                close(ends[1])
                let (status, message) = gzip.wait()
                if status != 0 { throw DeliveryError("gzip failed: \(message)") }
                throw error
            }
            close(ends[1])
            let (status, message) = gzip.wait()
            guard status == 0 else { throw DeliveryError("gzip failed: \(message)") }
            lseek(blob, 0, SEEK_SET)
            let stream = ByteStream(fd: blob, limit: UInt64.max)
            try stream.drain()
            var blobHash = stream.hash, tarHash = writer.hash
            let digest = "sha256:" + blobHash.hex()
            guard fsync(blob) == 0, rename(temporary, try layout.blobPath(digest)) == 0 else {
                throw DeliveryError("cannot store the layer blob", errno: errno)
            }
            progress.finish("\(source): layer of \(Progress.size(writer.total)), \(writer.entries) entries, "
                                + "\(Progress.size(stream.total)) compressed, in \(Pull.seconds(Progress.now() - started)) "
                                + "(\(Progress.rate(writer.total, Progress.now() - started)))")
            return ("sha256:" + tarHash.hex(), Export.descriptor(Export.layerType, digest, Int(stream.total)))
        } catch {
            progress.clear()
            unlink(temporary)
            throw error
        }
    }

    static func prepare(_ path: String) throws {
        for dir in [path, path + "/blobs", path + "/blobs/sha256"] {
            guard mkdir(dir, 0o755) == 0 || errno == EEXIST else {
                throw DeliveryError("cannot create \(dir)", errno: errno)
            }
        }
        if access(path + "/oci-layout", F_OK) != 0 {
            try Store.writeAtomically(path + "/oci-layout", Array(#"{"imageLayoutVersion":"1.0.0"}"#.utf8))
        }
        if access(path + "/index.json", F_OK) != 0 { try writeIndex([], in: path) }
    }

    static func descriptor(_ mediaType: String, _ digest: String, _ size: Int) -> JSON {
        .object([("mediaType", .string(mediaType)), ("digest", .string(digest)), ("size", .number(Double(size)))])
    }

    static func store(_ bytes: [UInt8], in layout: ImageLayout) throws -> (digest: String, size: Int) {
        let digest = "sha256:" + SHA256.hex(bytes)
        try Store.writeAtomically(try layout.blobPath(digest), bytes)
        return (digest, bytes.count)
    }

    static func size(_ path: String) throws -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw DeliveryError("cannot stat \(path)", errno: errno) }
        return Int(st.st_size)
    }

    static func replacing(_ object: JSON, _ key: String, _ value: JSON) -> JSON {
        guard case .object(let members) = object else { return .object([(key, value)]) }
        return .object(members.filter { $0.0 != key } + [(key, value)])
    }

    static let refName = "org.opencontainers.image.ref.name"

    static func entries(in path: String) throws -> [JSON] {
        try ImageLayout(path: path).json(file: path + "/index.json", what: "the layout's index.json")["manifests"]?.array ?? []
    }

    /// Points `tag` at `descriptor` (an entry of the same tag is replaced).
    static func tag(_ tag: String, _ descriptor: JSON, in path: String) throws {
        let kept = try entries(in: path).filter { $0["annotations"]?[refName]?.string != tag }
        try writeIndex(kept + [replacing(descriptor, "annotations", .object([(refName, .string(tag))]))], in: path)
    }

    static func untag(_ tag: String, in path: String) throws {
        try writeIndex(try entries(in: path).filter { $0["annotations"]?[refName]?.string != tag }, in: path)
    }

    static func writeIndex(_ entries: [JSON], in path: String) throws {
        let index = JSON.object([("schemaVersion", .number(2)), ("mediaType", .string("application/vnd.oci.image.index.v1+json")),
                                 ("manifests", .array(entries))])
        try Store.writeAtomically(path + "/index.json", Array((index.text + "\n").utf8))
    }
}
