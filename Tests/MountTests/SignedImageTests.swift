import CSyscalls
import Foundation
import XCTest

/// Signed patches with the real parts: images pushed by `proxybundle push --sign-by` with GPG
/// keys made here, their signatures served by nginx as a lookaside signature store (registries.d),
/// and trust set by the store's policy.json. Every refusal is one line naming the image and
/// the reason, adds no layer to the store and leaves a running mount's view as it was.
final class SignedImageTests: RegistryTestCase {
    var signatures: SignatureServer!
    var keys: SigningKeys!
    var registries: String { fx.root + "/registries.d" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        signatures = try SignatureServer.start(in: fx.root + "/lookaside")
        let server = signatures
        addTeardownBlock { server?.stop() }
        keys = try SigningKeys()
        let made = keys
        addTeardownBlock { made?.remove() }
        try keys.make("old")
        try keys.make("new")
        _ = try signatures.registriesDirectory(at: registries, for: registry)
    }

    override func tearDown() {
        signatures?.stop()
        keys?.remove()
        super.tearDown()
    }

    /// A patch of version `text`: `a.txt` and 20 files saying it.
    func source(_ text: String) throws -> String {
        let directory = fx.root + "/src-" + text
        try Disk.write(directory + "/a.txt", text)
        for i in 0..<20 { try Disk.write(directory + "/files/\(i)", "\(text) \(i)") }
        return directory
    }

    /// Pushes `directory` as app:TAG, signed by the key `signer` if given; returns the reference
    /// and its manifest digest.
    @discardableResult
    func push(_ directory: String, _ tag: String, signedBy signer: String? = nil) throws -> (reference: String, digest: String) {
        let reference = "\(registry.host)/app:\(tag)"
        let sign = signer.map { ["--sign-by", keys.fingerprints[$0] ?? $0] } ?? []
        let run = try Spawn.run(MountFixture.binary, ["push", directory, reference, "--tls-verify=false", "--registries.d", registries]
                                    + sign, environment: keys.environment)
        guard run.status == 0 else { throw TestFailure("push \(reference): \(run.error)") }
        return (reference, run.output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The store's policy: images of the test registry must be signed by one of `keys` (by
    /// name), anything else is rejected.
    func trust(_ names: [String], file: String? = nil) throws {
        let paths = names.map { "\"\(keys.publicKey($0))\"" }
        let key = paths.count == 1 ? #""keyPath":\#(paths[0])"# : #""keyPaths":[\#(paths.joined(separator: ","))]"#
        try Disk.write(file ?? store + "/policy.json", #"""
            {"default":[{"type":"reject"}],
             "transports":{"docker":{"\#(registry.host)":[{"type":"signedBy","keyType":"GPGKeys",\#(key)}]}}}
            """#)
    }

    func layers(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint] + arguments
                          + ["--store", store, "--tls-verify=false", "--registries.d", registries])
    }

    func storeLayers() throws -> [String] { try Disk.list(store + "/layers/sha256") }

    /// A refusal: exit 1, one line on stderr naming `image` and `reason`.
    func assertRefused(_ run: (status: Int32, output: String, error: String), _ image: String, _ reason: String,
                       file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(run.status, 1, run.error, file: file, line: line)
        XCTAssertEqual(run.error.split(separator: "\n").count, 1, run.error, file: file, line: line)
        XCTAssertTrue(run.error.contains(image) && run.error.contains(reason), run.error, file: file, line: line)
    }

    func testASignedImageSwitchesLiveUnderReadersAndNamesItsKey() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let v1 = try push(try source("v1"), "v1", signedBy: "old").reference
        let v2 = try push(try source("v2"), "v2", signedBy: "old").reference
        XCTAssertEqual(try Disk.list(signatures.served).filter { $0.hasPrefix("app@sha256=") }.count, 2, "push wrote the signatures")
        try fx.start()
        let first = try layers(["--set-image", v1])
        XCTAssertEqual(first.status, 0, first.error)
        XCTAssertEqual(first.error, "", "a verified image is switched to without a word")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1")

        let readers = VersionReaders(fx.mountpoint, readers: 2, versions: ["v1", "v2"])
        let second = try layers(["--set-image", v2])
        let failure = readers.stop()
        XCTAssertEqual(second.status, 0, second.error)
        XCTAssertNil(failure, "every read sees the old or the new version")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2")

        let old = keys.fingerprints["old"] ?? "", key = "signed by \(old) (\(keys.publicKey("old")))"
        let status = try Spawn.run(MountFixture.binary, ["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("  image: \(v2) sha256:") && status.output.contains(key), status.output)
        let json = try Spawn.run(MountFixture.binary, ["status", fx.mountpoint, "--json"])
        XCTAssertTrue(json.output.contains(#""signedBy":["\#(old) (\#(keys.publicKey("old")))"]"#), json.output)
        let which = try Spawn.run(MountFixture.binary, ["which", fx.inMount("a.txt")])
        XCTAssertTrue(which.output.split(separator: "\n").last?.hasSuffix(key) == true, which.output)
        let history = try layers(["--history"]).output.split(separator: "\n")
        XCTAssertEqual(history.count, 2)
        XCTAssertTrue(history.allSatisfy { $0.contains(key) }, "\(history)")

        // an image in the store whose tag has not moved: its kept signature is checked, no copy
        // made (the signature store is down: a copy could not read the signature)
        signatures.stop()
        for (image, text) in [(v1, "v1"), (v2, "v2")] {
            let again = try layers(["--set-image", image])
            XCTAssertEqual(again.status, 0, again.error)
            XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), text)
        }
        XCTAssertNotEqual(try Spawn.run(MountFixture.binary, ["pull", v1, "--store", store, "--tls-verify=false",
                                                              "--registries.d", registries]).status, 0, "a copy needs the signature store")

        // offline: the signature kept in the store is checked again, against the policy in force
        registry.stop()
        let back = try layers(["--rollback"])
        XCTAssertEqual(back.status, 0, back.error)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1")
        fx.stop()
        try fx.start(["-o", "image=\(v1),store=\(store)"])
        XCTAssertEqual(try Disk.read(fx.inMount("files/3")), "v1 3", "mounted from the store, its signature checked offline")
    }

    /// Sets a signed v1 on a mount, then tries `bad`: refused by `pull` and `--set-image` in
    /// one line with `reason`; no layer added, the view unchanged.
    func assertRefusedOnAMount(_ bad: String, _ reason: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try fx.start()
        XCTAssertEqual(try layers(["--set-image", try push(try source("v1"), "v1", signedBy: "old").reference]).status, 0)
        let before = try storeLayers(), view = try layers([]).output
        assertRefused(try layers(["--set-image", bad]), bad, reason, file: file, line: line)
        assertRefused(try Spawn.run(MountFixture.binary, ["pull", bad, "--store", store, "--tls-verify=false", "--registries.d", registries]),
                      bad, reason, file: file, line: line)
        XCTAssertEqual(try storeLayers(), before, "no layer added", file: file, line: line)
        XCTAssertEqual(try layers([]).output, view, "the patches are as they were", file: file, line: line)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1", file: file, line: line)
        XCTAssertEqual(try layers(["--history"]).output.split(separator: "\n").count, 1, file: file, line: line)
    }

    func testAnUnsignedImageIsRefused() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        try assertRefusedOnAMount(try push(try source("bad"), "bad").reference, "refused by the policy \(store)/policy.json: it is not signed")
    }

    func testAnImageSignedByAnotherKeyIsRefused() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let bad = try push(try source("bad"), "bad", signedBy: "new").reference
        try assertRefusedOnAMount(bad, "it is signed by \(keys.fingerprints["new"] ?? ""), a key the policy does not trust")
    }

    func testASignatureForAnotherReferenceIsRefused() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let signed = try push(try source("bad"), "elsewhere", signedBy: "old").reference
        let bad = "\(registry.host)/app:bad"
        // the same manifest under another tag: the lookaside finds the signature made for `elsewhere`
        let copied = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--src-tls-verify=false", "--dest-tls-verify=false",
                                                       "docker://" + signed, "docker://" + bad])
        XCTAssertEqual(copied.status, 0, copied.error)
        try assertRefusedOnAMount(bad, "its signature is for another reference, \(signed)")
    }

    func testAManifestChangedAfterSigningIsRefused() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let signed = try push(try source("bad"), "bad", signedBy: "old")
        let changed = try push(try source("changed"), "bad")  // the tag now names another manifest
        try Disk.mkdir(signatures.signatures("app", changed.digest))
        XCTAssertEqual(link(signatures.signatures("app", signed.digest) + "/signature-1",
                            signatures.signatures("app", changed.digest) + "/signature-1"), 0)
        try assertRefusedOnAMount(changed.reference, "its manifest changed after it was signed")
    }

    func testASignatureThatDoesNotParseIsRefused() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let bad = try push(try source("bad"), "bad")
        try Disk.mkdir(signatures.signatures("app", bad.digest))
        try Disk.write(signatures.signatures("app", bad.digest) + "/signature-1", "not an OpenPGP message at all")
        try assertRefusedOnAMount(bad.reference, "its signature does not parse")
    }

    /// Two keys trusted during a rotation, then the old one removed: an image signed only by
    /// it is refused online (`--set-image`) and offline (`--rollback`, `-o image=`).
    func testARotationTrustsBothKeysThenRefusesTheOldOne() throws {
        try Disk.mkdir(store)
        try trust(["old", "new"])
        let v1 = try push(try source("v1"), "v1", signedBy: "old").reference
        let v2 = try push(try source("v2"), "v2", signedBy: "new").reference
        try fx.start()
        XCTAssertEqual(try layers(["--set-image", v1]).status, 0)
        let second = try layers(["--set-image", v2])
        XCTAssertEqual(second.status, 0, second.error)
        let history = try layers(["--history"]).output.split(separator: "\n")
        XCTAssertTrue(history.first?.contains("signed by \(keys.fingerprints["old"] ?? "")") == true, "\(history)")
        XCTAssertTrue(history.last?.contains("signed by \(keys.fingerprints["new"] ?? "")") == true, "\(history)")

        try trust(["new"])  // the rotation is over
        let oldKey = "it is signed by \(keys.fingerprints["old"] ?? ""), a key the policy does not trust"
        let before = try storeLayers(), view = try layers([]).output
        assertRefused(try layers(["--set-image", v1]), v1, oldKey)
        registry.stop()
        signatures.stop()
        assertRefused(try layers(["--rollback"]), v1, oldKey)
        XCTAssertEqual(try layers([]).output, view)
        XCTAssertEqual(try storeLayers(), before)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2")
        XCTAssertTrue(try layers(["--history"]).output.split(separator: "\n").last?.hasSuffix("(current)") == true)

        fx.stop()
        defer { Unmounter.force(fx.mountpoint) }
        let refused = try Spawn.run(MountFixture.binary, ["mount", fx.main, fx.mountpoint, "--substitution", fx.substitution,
                                                          "-o", "image=\(v1),store=\(store)"])
        assertRefused(refused, v1, oldKey)
        XCTAssertFalse(fx.isMounted)
        try fx.start(["-o", "image=\(v2),store=\(store)"])
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2", "the new key's image mounts offline")
    }

    /// gc drops the kept signatures of the images it removes, and keeps those history names.
    func testGCRemovesTheSignaturesOfTheImagesItRemoves() throws {
        try Disk.mkdir(store)
        try trust(["old"])
        let v1 = try push(try source("v1"), "v1", signedBy: "old"), v2 = try push(try source("v2"), "v2", signedBy: "old")
        let v3 = try push(try source("v3"), "v3", signedBy: "old")
        try fx.start()
        for image in [v1, v2] { XCTAssertEqual(try layers(["--set-image", image.reference]).status, 0) }
        let pulled = try Spawn.run(MountFixture.binary, ["pull", v3.reference, "--store", store, "--tls-verify=false", "--registries.d", registries])
        XCTAssertEqual(pulled.status, 0, pulled.error)
        let hex = { (image: (reference: String, digest: String)) in String(image.digest.dropFirst(7)) }
        XCTAssertEqual(Set(try Disk.list(store + "/signatures")), Set([v1, v2, v3].map(hex)))
        let gc = try Spawn.run(MountFixture.binary, ["gc", "--keep", "1", "--store", store])
        XCTAssertEqual(gc.status, 0, gc.error)
        XCTAssertEqual(Set(try Disk.list(store + "/signatures")), Set([v1, v2].map(hex)), "v3 is gone, the history names v1 and v2")
    }

    /// A registry with TLS from a test CA and basic auth: push signs, pull verifies, with the
    /// same --cert-dir and --authfile.
    func testASignedImageThroughARegistryWithTLSAndAuth() throws {
        registry.stop()
        registry = try Registry.start(in: fx.root + "/secure", secure: true)
        let started = registry
        addTeardownBlock { started?.stop() }
        _ = try signatures.registriesDirectory(at: registries, for: registry)
        let auth = fx.root + "/auth.json"
        try registry.authFile(at: auth)
        let access = ["--cert-dir", registry.certificates, "--authfile", auth, "--registries.d", registries]
        let reference = "\(registry.host)/app:v1"
        let pushed = try Spawn.run(MountFixture.binary, ["push", try source("v1"), reference, "--sign-by", keys.fingerprints["old"] ?? ""]
                                       + access, environment: keys.environment)
        XCTAssertEqual(pushed.status, 0, pushed.error)
        try Disk.mkdir(store)
        try trust(["old"])
        let pulled = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store] + access)
        XCTAssertEqual(pulled.status, 0, pulled.error)
        XCTAssertEqual(pulled.error, "")
        XCTAssertEqual(try Disk.read(pulled.output.trimmingCharacters(in: .newlines) + "/a.txt"), "v1")
        let unsigned = try Spawn.run(MountFixture.binary, ["push", try source("v2"), "\(registry.host)/app:v2"] + access)
        XCTAssertEqual(unsigned.status, 0, unsigned.error)
        assertRefused(try Spawn.run(MountFixture.binary, ["pull", "\(registry.host)/app:v2", "--store", store] + access),
                      "\(registry.host)/app:v2", "it is not signed")
    }

    /// Today's unsigned workflow where the policy accepts anything (Debian's default policy):
    /// pull says once that the image is unverified, and status, which and the history say so.
    /// A store's policy.json that demands a signature refuses it; --policy overrides it.
    func testTheUnsignedWorkflowGoesOnWhereThePolicyAcceptsAnything() throws {
        let v1 = try push(try source("v1"), "v1").reference
        let pulled = try Spawn.run(MountFixture.binary, ["pull", v1, "--store", store, "--tls-verify=false"])
        XCTAssertEqual(pulled.status, 0, pulled.error)
        XCTAssertEqual(pulled.error, "proxybundle: \(v1): unverified: the policy /etc/containers/policy.json accepts it without a signature\n")
        try fx.start()
        XCTAssertEqual(try layers(["--set-image", v1]).status, 0)
        XCTAssertTrue(try Spawn.run(MountFixture.binary, ["status", fx.mountpoint]).output.contains("(1 of the patches), unverified"))
        XCTAssertTrue(try Spawn.run(MountFixture.binary, ["which", fx.inMount("a.txt")]).output.hasSuffix(" unverified\n"))
        XCTAssertTrue(try layers(["--history"]).output.contains("1 layers  unverified  (current)"))

        try trust(["old"])
        let v2 = try push(try source("v2"), "v2").reference
        assertRefused(try layers(["--set-image", v2]), v2, "it is not signed")
        let accepting = fx.root + "/accept-anything.json"
        try Disk.write(accepting, #"{"default":[{"type":"insecureAcceptAnything"}]}"#)
        let overridden = try layers(["--set-image", v2, "--policy", accepting])
        XCTAssertEqual(overridden.status, 0, overridden.error)
        XCTAssertEqual(overridden.error.split(separator: "\n").count, 1, overridden.error)
        XCTAssertTrue(overridden.error.contains("\(v2): unverified: the policy \(accepting)"), overridden.error)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2")
        // and back: v1 was accepted without a signature, which the store's policy no longer does
        assertRefused(try layers(["--rollback"]), v1, "it is not signed")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2")
    }
}
