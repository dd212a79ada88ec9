import Foundation
import ProxyBundleDelivery

/// OCI image layouts written by hand, as a producer other than proxybundle would write them:
/// blobs, a config with the diff-ids, a manifest (OCI or Docker v2), and index.json entries.
struct TestImage {
    enum Compression: String { case none, gzip, zstd }

    let layout: String

    init(layout: String) throws {
        self.layout = layout
        try Disk.mkdir(layout + "/blobs/sha256")
        try #"{"imageLayoutVersion":"1.0.0"}"#.write(toFile: layout + "/oci-layout", atomically: true, encoding: .utf8)
        if !FileManager.default.fileExists(atPath: layout + "/index.json") { try writeIndex([]) }
    }

    /// A directory as a layer: GNU tar in PAX format, names sorted, numeric owners, xattrs.
    static func tar(of directory: String) throws -> [UInt8] {
        let out = directory + ".tar"
        let run = try Spawn.run("/usr/bin/tar", ["--format=pax", "--xattrs", "--xattrs-include=user.*", "--numeric-owner",
                                                 "--sort=name", "-C", directory, "-cf", out, "."])
        guard run.status == 0 else { throw TestFailure("tar: \(run.error)") }
        defer { unlink(out) }
        return Array(try Data(contentsOf: URL(fileURLWithPath: out)))
    }

    static func compress(_ bytes: [UInt8], _ compression: Compression) throws -> [UInt8] {
        guard compression != .none else { return bytes }
        let file = FileManager.default.temporaryDirectory.path + "/pb-layer-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        defer { unlink(file); unlink(file + ".out") }
        let program = compression == .gzip ? "/usr/bin/gzip" : "/usr/bin/zstd"
        let run = try Spawn.run("/bin/sh", ["-c", "\(program) -c -n \"$1\" > \"$1.out\"", "sh", file])
        guard run.status == 0 else { throw TestFailure("\(program): \(run.error)") }
        return Array(try Data(contentsOf: URL(fileURLWithPath: file + ".out")))
    }

    static func digest(_ bytes: [UInt8]) -> String { "sha256:" + SHA256.hex(bytes) }

    /// Stores a blob; returns its descriptor fields.
    @discardableResult
    func blob(_ bytes: [UInt8]) throws -> (digest: String, size: Int) {
        let digest = TestImage.digest(bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path(of: digest)))
        return (digest, bytes.count)
    }

    func path(of digest: String) -> String { layout + "/blobs/sha256/" + digest.dropFirst(7) }

    /// An OCI manifest of `layers` (uncompressed tars, bottom first, each with its compression)
    /// and its config; returns the manifest's descriptor as JSON text. (skopeo writes a Docker
    /// v2 manifest from it with `--format v2s2`; it reads no Docker manifest from a layout.)
    func manifest(_ layers: [([UInt8], Compression)], architecture: String = "amd64") throws -> String {
        let diffIDs = layers.map { TestImage.digest($0.0) }
        let config = try blob(Array(#"{"architecture":"\#(architecture)","os":"linux","rootfs":{"type":"layers","diff_ids":[\#(diffIDs.map { "\"\($0)\"" }.joined(separator: ","))]}}"#.utf8))
        let layerTypes: [Compression: String] = [
            .none: "application/vnd.oci.image.layer.v1.tar", .gzip: "application/vnd.oci.image.layer.v1.tar+gzip",
            .zstd: "application/vnd.oci.image.layer.v1.tar+zstd"]
        var descriptors: [String] = []
        for (tar, compression) in layers {
            let stored = try blob(try TestImage.compress(tar, compression))
            descriptors.append(#"{"mediaType":"\#(layerTypes[compression] ?? "")","digest":"\#(stored.digest)","size":\#(stored.size)}"#)
        }
        let manifestType = "application/vnd.oci.image.manifest.v1+json"
        let configType = "application/vnd.oci.image.config.v1+json"
        let text = #"{"schemaVersion":2,"mediaType":"\#(manifestType)","config":{"mediaType":"\#(configType)","digest":"\#(config.digest)","size":\#(config.size)},"layers":[\#(descriptors.joined(separator: ","))]}"#
        let stored = try blob(Array(text.utf8))
        return #"{"mediaType":"\#(manifestType)","digest":"\#(stored.digest)","size":\#(stored.size),"platform":{"architecture":"\#(architecture)","os":"linux"}}"#
    }

    /// Tags an image of `layers` as `tag`.
    func add(tag: String, _ layers: [([UInt8], Compression)]) throws {
        try tagged(tag, try manifest(layers))
    }

    /// Tags an OCI image index of the given manifests (descriptors from `manifest`).
    func addIndex(tag: String, _ manifests: [String]) throws {
        let text = #"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[\#(manifests.joined(separator: ","))]}"#
        let stored = try blob(Array(text.utf8))
        try tagged(tag, #"{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"\#(stored.digest)","size":\#(stored.size)}"#)
    }

    private func tagged(_ tag: String, _ descriptor: String) throws {
        var entry = descriptor
        entry.removeLast()
        entry += #","annotations":{"org.opencontainers.image.ref.name":"\#(tag)"}}"#
        try writeIndex(try entries() + [entry])
    }

    private func entries() throws -> [String] {
        guard let data = FileManager.default.contents(atPath: layout + "/index.json"),
              let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let manifests = json["manifests"] as? [Any] else { return [] }
        return try manifests.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
    }

    private func writeIndex(_ entries: [String]) throws {
        try #"{"schemaVersion":2,"manifests":[\#(entries.joined(separator: ","))]}"#
            .write(toFile: layout + "/index.json", atomically: true, encoding: .utf8)
    }
}
