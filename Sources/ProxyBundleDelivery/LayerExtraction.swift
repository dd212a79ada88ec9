import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

/// One layer blob made into a directory: the blob checked against its digest, decompressed
/// by `gzip -dc` or `zstd -dc` (separate processes: well-kept decoders, on another core, and no
/// codec linked into the daemon), read by our own `TarReader`, written by `LayerWriter` under a
/// temporary name, checked against its diff-id, synced, then renamed into place. Whatever fails
/// leaves nothing.
public enum LayerExtraction {
    public enum Compression: String { case none, gzip, zstd }

    public static func compression(of mediaType: String) throws -> Compression {
        switch mediaType {
        case "application/vnd.oci.image.layer.v1.tar", "application/vnd.oci.image.layer.nondistributable.v1.tar",
             "application/vnd.docker.image.rootfs.diff.tar": return .none
        case "application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
             "application/vnd.docker.image.rootfs.diff.tar.gzip", "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip":
            return .gzip
        case "application/vnd.oci.image.layer.v1.tar+zstd", "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd":
            return .zstd
        default: throw DeliveryError("the layer media type '\(mediaType)' is not a tar, tar+gzip or tar+zstd layer")
        }
    }

    /// What an extraction found: entries dropped (devices, FIFOs) and bytes of tar read.
    public struct Result {
        public var dropped = 0
        public var bytes: UInt64 = 0
    }

    /// Extracts `layer` (its blob at `blob`) to `target`, through a temporary directory in
    /// `work` (on the same file system), showing how far it got on `progress` as `label`.
    public static func extract(blob: String, layer: ImageLayout.Layer, to target: String, work: String,
                               limits: ExtractLimits, progress: Progress = Progress(enabled: false),
                               label: String = "") throws -> Result {
        let compression = try compression(of: layer.mediaType)
        let fd = open(blob, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DeliveryError("cannot open blob \(layer.digest)", errno: errno) }
        defer { close(fd) }
        var st = stat()
        let blobSize = fstat(fd, &st) == 0 ? UInt64(st.st_size) : 0
        progress.update("\(label): checking \(Progress.size(blobSize))", force: true)
        try verify(fd, digest: layer.digest)
        let name = "layer-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let temporary = work + "/" + name
        guard mkdir(temporary, 0o755) == 0 else { throw DeliveryError("cannot create \(temporary)", errno: errno) }
        do {
            let shown = Shown(progress: progress, label: label, blob: fd, blobSize: blobSize)
            let result = try unpack(fd, compression: compression, into: temporary, layer: layer, limits: limits, shown: shown)
            guard rename(temporary, target) == 0 else {
                throw DeliveryError("cannot rename the layer into \(target)", errno: errno)
            }
            try syncDirectory(parentOf: target)
            return result
        } catch {
            try? Tree.remove(path: temporary)
            throw error
        }
    }

    /// What an extraction shows while it runs: tar bytes, entries, rate, and how much of the
    /// blob the decoder has read (the decoder shares the blob's file offset).
    private final class Shown {
        let progress: Progress
        let label: String
        let blob: Int32
        let blobSize: UInt64
        let started = Progress.now()
        var entries = 0

        init(progress: Progress, label: String, blob: Int32, blobSize: UInt64) {
            self.progress = progress
            self.label = label
            self.blob = blob
            self.blobSize = blobSize
        }

        func update(tarBytes: UInt64) {
            guard progress.isDue else { return }
            let offset = lseek(blob, 0, SEEK_CUR)
            let part = blobSize > 0 && offset >= 0 ? ", \(min(100, UInt64(offset) * 100 / blobSize))% of the blob" : ""
            progress.update("\(label): extracting \(Progress.size(tarBytes)), \(entries) entries, "
                                + Progress.rate(tarBytes, Progress.now() - started) + part)
        }
    }

    private static func unpack(_ blob: Int32, compression: Compression, into directory: String, layer: ImageLayout.Layer,
                               limits: ExtractLimits, shown: Shown) throws -> Result {
        let root = open(directory, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard root >= 0 else { throw DeliveryError("cannot open \(directory)", errno: errno) }
        defer { close(root) }
        lseek(blob, 0, SEEK_SET)
        let child: ChildProcess? = compression == .none ? nil
            : try ChildProcess(compression.rawValue, compression == .gzip ? ["-dc"] : ["-dcq"], input: blob, captureOutput: true)
        let stream = ByteStream(fd: child?.output ?? blob, limit: limits.maxBytes)
        var reader = TarReader(stream: stream, maxEntries: limits.maxEntries)
        let writer = LayerWriter(root: root, limits: limits)
        if shown.progress.enabled { stream.onRead = { [unowned shown] in shown.update(tarBytes: $0) } }
        defer { stream.onRead = nil }
        do {
            while let entry = try reader.next() {
                try writer.write(entry, reader: reader)
                shown.entries = reader.entries
            }
        } catch {
            // a decoder that failed explains a short stream better than the tar reader does
            if let child, case ByteStream.Failure.truncated = error {
                let (status, message) = child.wait()
                if status != 0 && status < 128 { throw DeliveryError("blob \(layer.digest) is damaged: \(message)") }
            } else if let child {
                child.stop()
            }
            throw describe(error, layer: layer, limits: limits)
        }
        if let child {
            let (status, message) = child.wait()
            if status != 0 { throw DeliveryError("blob \(layer.digest) is damaged: \(message)") }
        }
        var hash = stream.hash
        guard "sha256:" + hash.hex() == layer.diffID else {
            throw DeliveryError("layer \(layer.digest) does not match its diff-id \(layer.diffID)")
        }
        try writer.finish()
        return Result(dropped: writer.dropped, bytes: stream.total)
    }

    private static func describe(_ error: Error, layer: ImageLayout.Layer, limits: ExtractLimits) -> Error {
        switch error {
        case ByteStream.Failure.truncated: return DeliveryError("layer \(layer.digest) ends inside an entry (truncated)")
        case ByteStream.Failure.tooLarge:
            return DeliveryError("layer \(layer.digest) is larger than \(limits.maxBytes) bytes uncompressed (--max-size)")
        case ByteStream.Failure.readError(let code):
            return DeliveryError("cannot read layer \(layer.digest)", errno: code)
        case let refusal as LayerRefusal: return DeliveryError("layer \(layer.digest) refused: \(refusal)")
        default: return error
        }
    }

    /// Reads the whole blob and compares its sha256 with `digest`.
    static func verify(_ fd: Int32, digest: String) throws {
        let stream = ByteStream(fd: fd, limit: UInt64.max)
        try stream.drain()
        var hash = stream.hash
        guard "sha256:" + hash.hex() == digest else { throw DeliveryError("blob \(digest) does not match its digest") }
    }

    static func syncDirectory(parentOf path: String) throws {
        let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let fd = open(parent.isEmpty ? "/" : parent, O_RDONLY | pb_O_DIRECTORY | pb_O_CLOEXEC)
        guard fd >= 0 else { throw DeliveryError("cannot open \(parent)", errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw DeliveryError("cannot sync \(parent)", errno: errno) }
    }
}
