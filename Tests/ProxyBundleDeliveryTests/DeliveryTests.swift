import Foundation
@testable import ProxyBundleDelivery
import XCTest

/// The delivery code's pieces on temporary directories: digests, JSON, image layouts written
/// by other tools (Docker v2 manifests, indexes), and a blob or layer that does not match the
/// digest the image names.
final class DeliveryTests: XCTestCase {
    var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.path + "/pb-delivery-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/oci/blobs/sha256", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: directory + "/work", withIntermediateDirectories: true)
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

    func testSHA256MatchesTheStandardVectors() {
        XCTAssertEqual(SHA256.hex([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        var pieces = SHA256()  // one million 'a', fed in uneven pieces
        var left = 1_000_000, size = 1
        while left > 0 {
            let n = min(size, left)
            pieces.update([UInt8](repeating: 0x61, count: n))
            left -= n
            size = size * 3 % 1000 + 1
        }
        XCTAssertEqual(pieces.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every length around the block size, fed whole and in pieces, against coreutils'
    /// sha256sum (another implementation): the standard 448-bit vector too.
    func testSHA256AgreesWithSha256sum() throws {
        XCTAssertEqual(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for length in [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 129, 4095, 4096, 4097, 70_000] {
            let file = directory + "/work/piece"
            try Data(bytes[..<length]).write(to: URL(fileURLWithPath: file))
            let tool = Process()
            tool.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
            tool.arguments = [file]
            let out = Pipe()
            tool.standardOutput = out
            try tool.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            tool.waitUntilExit()
            var pieces = SHA256()
            var at = 0
            while at < length {
                let next = min(length, at + 1 + at % 97)
                pieces.update(Array(bytes[at..<next]))
                at = next
            }
            XCTAssertEqual(SHA256.hex(Array(bytes[..<length])), String(text.prefix(64)), "\(length) bytes")
            XCTAssertEqual(pieces.hex(), String(text.prefix(64)), "\(length) bytes in pieces")
        }
    }

    /// A copy hashes on from where it was taken, and neither changes the other (the stream's
    /// hash is copied, then finished, while the stream may read on).
    func testSHA256CopiesAreValues() {
        var first = SHA256()
        first.update(Array("ab".utf8))
        var second = first
        second.update(Array("c".utf8))
        var third = second
        XCTAssertEqual(third.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc")
        first.update(Array("cdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
        XCTAssertEqual(first.hex(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(second.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    func testJSONReadsWhatManifestsHold() throws {
        let json = try JSON.parse(Array(#"{"a":[1,2.5,true,null,"x\u00e9\n\"q\""],"b":{"c":"d"}}"#.utf8))
        XCTAssertEqual(json["a"]?.array?.count, 5)
        XCTAssertEqual(json["a"]?.array?[4].string, "x\u{e9}\n\"q\"")
        XCTAssertEqual(json["b"]?["c"]?.string, "d")
        XCTAssertThrowsError(try JSON.parse(Array(#"{"a":}"#.utf8)))
        XCTAssertThrowsError(try JSON.parse(Array(String(repeating: "[", count: 100).utf8)))
    }

    /// Writes a blob of the layout; returns its digest.
    @discardableResult
    func blob(_ text: String) throws -> String { try blob(Array(text.utf8)) }

    @discardableResult
    func blob(_ bytes: [UInt8]) throws -> String {
        let digest = "sha256:" + SHA256.hex(bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: directory + "/oci/blobs/sha256/" + digest.dropFirst(7)))
        return digest
    }

    func index(_ tag: String, _ digest: String, _ mediaType: String) throws {
        try #"{"schemaVersion":2,"manifests":[{"mediaType":"\#(mediaType)","digest":"\#(digest)","size":1,"annotations":{"org.opencontainers.image.ref.name":"\#(tag)"}}]}"#
            .write(toFile: directory + "/oci/index.json", atomically: true, encoding: .utf8)
    }

    func dockerManifest(layer: [UInt8], diffID: String) throws -> String {
        let config = try blob(#"{"rootfs":{"type":"layers","diff_ids":["\#(diffID)"]}}"#)
        return try blob(#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"\#(config)","size":1},"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"\#(try blob(layer))","size":1}]}"#)
    }

    func testADockerManifestInAnIndexIsRead() throws {
        let amd = try dockerManifest(layer: [1], diffID: "sha256:" + String(repeating: "a", count: 64))
        let arm = try dockerManifest(layer: [2], diffID: "sha256:" + String(repeating: "b", count: 64))
        let list = try blob(#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"digest":"\#(arm)","platform":{"os":"linux","architecture":"arm64"}},{"digest":"\#(amd)","platform":{"os":"linux","architecture":"amd64"}}]}"#)
        try index("t", list, "application/vnd.docker.distribution.manifest.list.v2+json")
        let image = try ImageLayout(path: directory + "/oci").image(tag: "t")
        XCTAssertEqual(image.manifestDigest, amd)
        XCTAssertEqual(image.layers.map(\.diffID), ["sha256:" + String(repeating: "a", count: 64)])
        XCTAssertEqual(try LayerExtraction.compression(of: image.layers[0].mediaType), .gzip)
    }

    func testAManifestThatDoesNotMatchItsDigestIsRefused() throws {
        let manifest = try dockerManifest(layer: [1], diffID: "sha256:" + String(repeating: "a", count: 64))
        let path = directory + "/oci/blobs/sha256/" + manifest.dropFirst(7)
        try (try String(contentsOfFile: path, encoding: .utf8) + " ").write(toFile: path, atomically: true, encoding: .utf8)
        try index("t", manifest, "application/vnd.docker.distribution.manifest.v2+json")
        XCTAssertThrowsError(try ImageLayout(path: directory + "/oci").image(tag: "t")) {
            XCTAssertTrue("\($0)".contains("does not match its digest"), "\($0)")
        }
    }

    /// A tar of one file `name` holding `text`, as GNU tar writes it.
    func tar(_ name: String, _ text: String) throws -> [UInt8] {
        let source = directory + "/source-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try text.write(toFile: source + "/" + name, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tar")
        process.arguments = ["-C", source, "-cf", source + ".tar", "."]
        try process.run()
        process.waitUntilExit()
        return Array(try Data(contentsOf: URL(fileURLWithPath: source + ".tar")))
    }

    func testABlobOrLayerThatDoesNotMatchItsDigestLeavesNothing() throws {
        let bytes = try tar("f", "content")
        let digest = try blob(bytes)
        let target = directory + "/layer"
        let blobPath = directory + "/oci/blobs/sha256/" + digest.dropFirst(7)
        // the blob's bytes changed after it was named
        var changed = bytes
        changed[600] ^= 1
        try Data(changed).write(to: URL(fileURLWithPath: blobPath))
        let layer = ImageLayout.Layer(digest: digest, mediaType: "application/vnd.oci.image.layer.v1.tar", diffID: digest)
        XCTAssertThrowsError(try LayerExtraction.extract(blob: blobPath, layer: layer, to: target, work: directory + "/work",
                                                         limits: ExtractLimits())) {
            XCTAssertTrue("\($0)".contains("does not match its digest"), "\($0)")
        }
        // the blob right, the config's diff-id not
        try Data(bytes).write(to: URL(fileURLWithPath: blobPath))
        let wrongDiff = ImageLayout.Layer(digest: digest, mediaType: layer.mediaType, diffID: "sha256:" + String(repeating: "0", count: 64))
        XCTAssertThrowsError(try LayerExtraction.extract(blob: blobPath, layer: wrongDiff, to: target, work: directory + "/work",
                                                         limits: ExtractLimits())) {
            XCTAssertTrue("\($0)".contains("does not match its diff-id"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory + "/work"), [])
        _ = try LayerExtraction.extract(blob: blobPath, layer: layer, to: target, work: directory + "/work", limits: ExtractLimits())
        XCTAssertEqual(try String(contentsOfFile: target + "/f", encoding: .utf8), "content")
    }
}
