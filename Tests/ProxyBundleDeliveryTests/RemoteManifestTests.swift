import Foundation
@testable import ProxyBundleDelivery
import XCTest

/// What is read of a registry's manifest before anything is fetched (`RemoteManifest`): the
/// number of layers, the entry an index leads to, and the limit, checked through skopeo on an
/// image layout (the registry's side is LayerLimitTests').
final class RemoteManifestTests: XCTestCase {
    static let digest = "sha256:" + String(repeating: "ab", count: 32)

    static func manifest(layers: Int) -> [UInt8] {
        let layer = #"{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"\#(digest)","size":1}"#
        return Array(#"{"schemaVersion":2,"config":{"digest":"\#(digest)","size":1},"layers":[\#(Array(repeating: layer, count: layers).joined(separator: ","))]}"#.utf8)
    }

    func testAManifestsLayersAndAnIndexsEntryAreRead() throws {
        XCTAssertEqual(try RemoteManifest.contents(of: Self.manifest(layers: 3)), .image(layers: 3))
        XCTAssertEqual(try RemoteManifest.contents(of: Self.manifest(layers: 0)), .image(layers: 0))
        let other = "sha256:" + String(repeating: "cd", count: 32)
        let index = #"{"manifests":[{"digest":"\#(other)","platform":{"os":"linux","architecture":"arm64"}},"#
            + #"{"digest":"\#(Self.digest)","platform":{"os":"linux","architecture":"amd64"}}]}"#
        XCTAssertEqual(try RemoteManifest.contents(of: Array(index.utf8)), .index(chosen: Self.digest))
        for bad in ["", "{", "[]", #"{"manifests":[]}"#, #"{"manifests":[{"digest":"md5:x"}]}"#, #"{"config":{}}"#] {
            XCTAssertThrowsError(try RemoteManifest.contents(of: Array(bad.utf8)), bad)
        }
    }

    func testARegistrySourceIsPinnedToADigest() {
        let pinned = "@" + Self.digest
        XCTAssertEqual(Skopeo.pinned("docker://127.0.0.1:5000/app:v1", to: Self.digest), "docker://127.0.0.1:5000/app" + pinned)
        XCTAssertEqual(Skopeo.pinned("docker://127.0.0.1:5000/team/app", to: Self.digest), "docker://127.0.0.1:5000/team/app" + pinned)
        XCTAssertEqual(Skopeo.pinned("docker://host/app@sha256:00", to: Self.digest), "docker://host/app" + pinned)
        XCTAssertNil(Skopeo.pinned("oci:/srv/layout:v1", to: Self.digest))
    }

    /// 10,000 layers pass, 10,001 are refused in one line, read by `skopeo inspect --raw`
    /// from an image layout (whose layer blobs need not exist: nothing but the manifest is read).
    func testTheLimitIsAMountsMostPatches() throws {
        let layout = FileManager.default.temporaryDirectory.path + "/pb-manifest-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: layout) }
        try FileManager.default.createDirectory(atPath: layout + "/blobs/sha256", withIntermediateDirectories: true)
        try #"{"imageLayoutVersion":"1.0.0"}"#.write(toFile: layout + "/oci-layout", atomically: true, encoding: .utf8)
        var entries: [String] = []
        for count in [RemoteManifest.maxLayers, RemoteManifest.maxLayers + 1] {
            let bytes = Self.manifest(layers: count)
            let hex = SHA256.hex(bytes)
            try Data(bytes).write(to: URL(fileURLWithPath: layout + "/blobs/sha256/" + hex))
            entries.append(#"{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:\#(hex)","size":\#(bytes.count),"annotations":{"org.opencontainers.image.ref.name":"l\#(count)"}}"#)
        }
        try #"{"schemaVersion":2,"manifests":[\#(entries.joined(separator: ","))]}"#.write(toFile: layout + "/index.json", atomically: true, encoding: .utf8)
        XCTAssertNoThrow(try RemoteManifest.check("oci:\(layout):l10000", skopeo: Skopeo()))
        XCTAssertThrowsError(try RemoteManifest.check("oci:\(layout):l10001", skopeo: Skopeo())) { error in
            XCTAssertEqual("\(error)", "the image has 10001 layers, more than a mount can stack (10000); nothing was fetched")
        }
        XCTAssertThrowsError(try RemoteManifest.check("oci:\(layout):missing", skopeo: Skopeo())) { error in
            XCTAssertTrue("\(error)".hasPrefix("skopeo could not read the manifest of oci:\(layout):missing: "), "\(error)")
        }
    }
}
