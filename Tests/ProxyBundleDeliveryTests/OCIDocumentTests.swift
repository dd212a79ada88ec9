import Foundation
import ProxyBundleDelivery
import XCTest

/// OCI documents as a hostile registry may serve them, read through the entry points `pull`
/// uses (`ImageLayout.image(tag:)`, `RemoteManifest.contents`); the oci fuzz target's findings
/// are kept here.
final class OCIDocumentTests: XCTestCase {
    var layout = ""

    override func setUpWithError() throws {
        layout = FileManager.default.temporaryDirectory.path + "/pb-oci-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: layout + "/blobs/sha256", withIntermediateDirectories: true)
        try #"{"imageLayoutVersion":"1.0.0"}"#.write(toFile: layout + "/oci-layout", atomically: true, encoding: .utf8)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: layout) }

    /// Stores `text` as a blob; returns its digest.
    func blob(_ text: String) throws -> String {
        let hex = SHA256.hex(Array(text.utf8))
        try text.write(toFile: layout + "/blobs/sha256/" + hex, atomically: true, encoding: .utf8)
        return "sha256:" + hex
    }

    /// An image tagged `latest` whose config is `config`.
    func image(config: String) throws -> ImageLayout.Image {
        let manifest = try blob(#"{"layers":[],"config":{"digest":"\#(try blob(config))"}}"#)
        try #"{"manifests":[{"digest":"\#(manifest)","annotations":{"org.opencontainers.image.ref.name":"latest"}}]}"#
            .write(toFile: layout + "/index.json", atomically: true, encoding: .utf8)
        return try ImageLayout(path: layout).image(tag: "latest")
    }

    /// Fuzz finding (oci, crash-0ca40c40): a high surrogate escaped before an escape that is no
    /// low surrogate (`\ud83d\uaaca`) made an arithmetic overflow that ended the process. Such a
    /// document is not JSON: refused in one line, in a config as in a registry's manifest.
    func testAHighSurrogateBeforeAnythingButALowOneIsRefused() throws {
        XCTAssertThrowsError(try image(config: #"{"rootfs":{"diff_ids":[]},"x":[1.5e3,-0,true,false,null,"\ud83d\uaaca"]}"#)) { error in
            XCTAssertTrue("\(error)".contains("is not valid JSON"), "\(error)")
        }
        XCTAssertThrowsError(try RemoteManifest.contents(of: Array(#"{"layers":[],"x":"\ud83d\uaaca"}"#.utf8)))
        // a pair is one character
        XCTAssertEqual(try image(config: #"{"rootfs":{"diff_ids":[]},"x":"\ud83d\ude00"}"#).layers.count, 0)
        XCTAssertEqual(try RemoteManifest.contents(of: Array(#"{"layers":[],"x":"\ud83d\ude00"}"#.utf8)), .image(layers: 0))
    }
}
