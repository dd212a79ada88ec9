import Foundation
@testable import ProxyBundleDelivery
import XCTest

/// How a policy is read without skopeo (for switches made from the store): which scope's
/// requirements apply to a reference, which signed references stand for an image, and
/// skopeo's refusals in the words proxybundle says them.
final class PolicyTests: XCTestCase {
    func testReferencesAreReadAsTheContainersToolsReadThem() {
        XCTAssertEqual(DockerReference.image("busybox")?.text, "docker.io/library/busybox:latest")
        XCTAssertEqual(DockerReference.image("docker.io/busybox")?.text, "docker.io/library/busybox:latest")
        XCTAssertEqual(DockerReference("example.com/team/app")?.isNameOnly, true)
        let both = DockerReference("localhost:5000/app:v1@sha256:" + String(repeating: "a", count: 64))
        XCTAssertEqual(both?.name, "localhost:5000/app")
        XCTAssertEqual(both?.tag, "v1")
        XCTAssertNil(DockerReference("host/app@sha256:short"))
        XCTAssertNil(DockerReference("host//app"))
        XCTAssertEqual(DockerReference.image("registry.example.com:5000/team/app:v2")?.scopes, [
            "registry.example.com:5000/team/app:v2", "registry.example.com:5000/team/app", "registry.example.com:5000/team",
            "registry.example.com:5000", "*.example.com", "*.com"])
    }

    func testTheMostSpecificScopeWins() throws {
        let file = FileManager.default.temporaryDirectory.path + "/pb-policy-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try #"""
            {"default":[{"type":"reject"}],
             "transports":{"docker":{
               "host:5000":[{"type":"insecureAcceptAnything"}],
               "host:5000/team":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k/team.gpg"}],
               "host:5000/team/app:v1":[{"type":"reject"}],
               "*.example.com":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k/example.gpg"}]}}}
            """#.write(toFile: file, atomically: true, encoding: .utf8)
        let policy = try Policy(path: file)
        func first(_ source: String) -> String? {
            let requirement = policy.requirements(for: source).first
            return requirement?["keyPath"]?.string ?? requirement?["type"]?.string
        }
        XCTAssertEqual(first("docker://host:5000/team/app:v1"), "reject")
        XCTAssertEqual(first("docker://host:5000/team/app:v2"), "/k/team.gpg")
        XCTAssertEqual(first("docker://host:5000/other:v2"), "insecureAcceptAnything")
        XCTAssertEqual(first("docker://registry.example.com/app"), "/k/example.gpg")
        XCTAssertEqual(first("docker://elsewhere.org/app:v1"), "reject")
        XCTAssertEqual(first("oci:/srv/images/app:v1"), "reject", "another transport: its own scopes, else default")
        XCTAssertThrowsError(try Policy(path: file + ".missing"))
    }

    func testSignedIdentitiesFollowThePolicysRule() {
        func matches(_ rule: String?, _ image: String, _ signed: String) -> Bool {
            let json = rule.flatMap { try? JSON.parse(Array($0.utf8)) }
            return Trust.identityMatches(json, source: "docker://" + image, signed: signed)
        }
        let digest = "sha256:" + String(repeating: "b", count: 64)
        XCTAssertTrue(matches(nil, "host/app:v1", "host/app:v1"))
        XCTAssertFalse(matches(nil, "host/app:v1", "host/app:v2"), "a tag: that very tag")
        XCTAssertTrue(matches(nil, "host/app@\(digest)", "host/app:v7"), "a digest: the repository")
        XCTAssertFalse(matches(nil, "host/app@\(digest)", "host/other:v7"))
        XCTAssertTrue(matches(#"{"type":"matchRepository"}"#, "host/app:v1", "host/app:v2"))
        XCTAssertFalse(matches(#"{"type":"matchExact"}"#, "host/app@\(digest)", "host/app:v7"))
        XCTAssertTrue(matches(#"{"type":"exactReference","dockerReference":"host/app:signed"}"#, "host/app:v1", "host/app:signed"))
        XCTAssertTrue(matches(#"{"type":"exactRepository","dockerRepository":"host/app"}"#, "mirror/app:v1", "host/app:v3"))
        XCTAssertTrue(matches(#"{"type":"remapIdentity","prefix":"mirror.local","signedPrefix":"host"}"#,
                              "mirror.local/app:v1", "host/app:v1"))
        XCTAssertFalse(matches(#"{"type":"remapIdentity","prefix":"mirror.local","signedPrefix":"host"}"#,
                               "mirror.local/app:v1", "mirror.local/app:v2"))
        XCTAssertFalse(Trust.identityMatches(nil, source: "oci:/srv/app:v1", signed: "host/app:v1"), "no reference, no match")
    }

    func testSkopeosRefusalsAreSaidInOneShortPhrase() {
        let fingerprint = "AE303A4F1EC9A0767E6A44A5825727DB93D7C8D7"
        XCTAssertEqual(Trust.reason(skopeo: "Source image rejected: A signature was required, but no signature exists"),
                       "it is not signed")
        XCTAssertEqual(Trust.reason(skopeo: #"Source image rejected: Invalid GPG signature: gpgme.Signature{Summary:128, Fingerprint:"\#(fingerprint)", Status:gpgme.Error{err:0x9}}"#),
                       "it is signed by \(fingerprint), a key the policy does not trust")
        XCTAssertEqual(Trust.reason(skopeo: "Source image rejected: Signature for identity host/app:x is not accepted"),
                       "its signature is for another reference, host/app:x")
        XCTAssertEqual(Trust.reason(skopeo: "Source image rejected: Signature for digest sha256:1 does not match"),
                       "its manifest changed after it was signed")
        XCTAssertEqual(Trust.reason(skopeo: "Source image rejected: parsing signature http://x/sig: unrecognized signature format"),
                       "its signature does not parse")
        XCTAssertEqual(Trust.reason(skopeo: "Source image rejected: Running image docker://h/a:v1 is rejected by policy."),
                       "the policy rejects it")
        XCTAssertNil(Trust.reason(skopeo: "pinging container registry h: connection refused"))
    }

    func testSignatureLocationsNameTheirManifest() {
        let hex = String(repeating: "c", count: 64)
        XCTAssertEqual(Signatures.digest("http://127.0.0.1:8080/team/app@sha256=\(hex)/signature-2"), "sha256:" + hex)
        XCTAssertEqual(Signatures.number("/var/lib/sigs/app@sha256=\(hex)/signature-12"), 12)
        XCTAssertNil(Signatures.number("http://h/app@sha256=\(hex)/other"))
        XCTAssertNil(Signatures.digest("http://h/app/signature-1"))
        XCTAssertEqual(KeyFiles.base64("aGVs\nbG8="), Array("hello".utf8))
        XCTAssertNil(KeyFiles.base64("not base64!"))
    }
}
