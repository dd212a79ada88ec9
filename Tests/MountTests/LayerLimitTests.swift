import Foundation
import ProxyBundleCore
import ProxyBundleDelivery
import XCTest

/// An image whose manifest lists more layers than a mount can stack is refused before a blob
/// is fetched: a real registry serves a crafted manifest of 10,001 layers (one small layer
/// named again and again, with a config of as many diff-ids), put there over its HTTP API as
/// a hostile producer would (skopeo itself would copy every entry, for minutes).
final class LayerLimitTests: RegistryTestCase {
    /// Pushes a one-layer image as `app:small` (its layer and config blobs then exist in the
    /// registry), then the crafted manifest of `count` layers as `app:TAG`; returns its
    /// reference and its manifest's descriptor.
    func craft(_ count: Int, tag: String) throws -> (reference: String, descriptor: String) {
        let source = fx.root + "/src"
        try Disk.write(source + "/f", "one small layer")
        let tar = try TestImage.tar(of: source), layer = try TestImage.compress(tar, .gzip)
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "small", [(tar, .gzip)])
        let pushed = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "oci:\(layout):small",
                                                       "docker://\(registry.host)/app:small"])
        guard pushed.status == 0 else { throw TestFailure("skopeo copy to the registry: \(pushed.error)") }
        let diffID = TestImage.digest(tar)
        let config = Array(#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[\#(Array(repeating: "\"\(diffID)\"", count: count).joined(separator: ","))]}}"#.utf8)
        try uploadBlob(config)
        let descriptor = #"{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"\#(TestImage.digest(layer))","size":\#(layer.count)}"#
        let manifest = Array(#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"\#(TestImage.digest(config))","size":\#(config.count)},"layers":[\#(Array(repeating: descriptor, count: count).joined(separator: ","))]}"#.utf8)
        try put(manifest, type: "application/vnd.oci.image.manifest.v1+json", tag: tag)
        return ("\(registry.host)/app:\(tag)",
                #"{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"\#(TestImage.digest(manifest))","size":\#(manifest.count)}"#)
    }

    /// The registry's API, through curl (a blob upload in two requests, a manifest put).
    func curl(_ arguments: [String], body: [UInt8]) throws -> String {
        let file = fx.root + "/body-\(UInt32.random(in: 0...UInt32.max))"
        try Data(body).write(to: URL(fileURLWithPath: file))
        defer { unlink(file) }
        let run = try Spawn.run("/usr/bin/curl", ["--silent", "--show-error", "--fail", "--data-binary", "@" + file] + arguments,
                                seconds: 120)
        guard run.status == 0 else { throw TestFailure("curl \(arguments): \(run.error)") }
        return run.output
    }

    func uploadBlob(_ bytes: [UInt8]) throws {
        let started = try curl(["--include", "-X", "POST", "http://\(registry.host)/v2/app/blobs/uploads/"], body: [])
        guard let location = started.split(whereSeparator: \.isNewline)
            .first(where: { $0.lowercased().hasPrefix("location: ") })?.dropFirst("location: ".count) else {
            throw TestFailure("no upload location in \(started)")
        }
        let url = (location.hasPrefix("/") ? "http://\(registry.host)" : "") + location + (location.contains("?") ? "&" : "?")
            + "digest=" + TestImage.digest(bytes)
        _ = try curl(["-X", "PUT", "-H", "Content-Type: application/octet-stream", url], body: bytes)
    }

    func put(_ manifest: [UInt8], type: String, tag: String) throws {
        _ = try curl(["-X", "PUT", "-H", "Content-Type: \(type)", "http://\(registry.host)/v2/app/manifests/\(tag)"], body: manifest)
    }

    /// Runs `arguments`; checks it failed with one line naming the count and the limit, and
    /// that no blob was fetched and nothing entered the store's layout.
    func assertRefusedBeforeFetching(_ arguments: [String], layers: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let fetchedBefore = registry.blobFetches().count
        let run = try Spawn.run(MountFixture.binary, arguments + ["--store", store, "--tls-verify=false"], seconds: 60)
        XCTAssertEqual(run.status, 1, run.error, file: file, line: line)
        let lines = run.error.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, run.error, file: file, line: line)
        XCTAssertTrue(run.error.contains("the image has \(layers) layers, more than a mount can stack (10000); nothing was fetched"),
                      run.error, file: file, line: line)
        XCTAssertEqual(Array(registry.blobFetches().dropFirst(fetchedBefore)), [], "blobs fetched", file: file, line: line)
        let blobs = (try? FileManager.default.contentsOfDirectory(atPath: store + "/oci/blobs/sha256")) ?? []
        XCTAssertEqual(blobs, [], "blobs in the store", file: file, line: line)
    }

    func testAManifestOfMoreLayersThanAStackHoldsIsRefusedBeforeAnyBlobIsFetched() throws {
        XCTAssertEqual(RemoteManifest.maxLayers, LayerList.patchLimit)
        let (reference, descriptor) = try craft(LayerList.patchLimit + 1, tag: "big")
        try assertRefusedBeforeFetching(["pull", reference], layers: LayerList.patchLimit + 1)
        // the same manifest as the linux/amd64 entry of an index
        let amd64 = descriptor.dropLast() + #","platform":{"architecture":"amd64","os":"linux"}}"#
        let index = Array(#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[\#(amd64)]}"#.utf8)
        try put(index, type: "application/vnd.oci.image.index.v1+json", tag: "big-index")
        try assertRefusedBeforeFetching(["pull", "\(registry.host)/app:big-index"], layers: LayerList.patchLimit + 1)
        // and switched to on a running mount: the mount keeps its layers
        try fx.start()
        try assertRefusedBeforeFetching(["layers", fx.mountpoint, "--set-image", reference], layers: LayerList.patchLimit + 1)
        XCTAssertEqual(try Disk.read(fx.mountpoint + "/.layers").split(separator: "\n").count, 2, "substitution and main bundle")
    }
}
