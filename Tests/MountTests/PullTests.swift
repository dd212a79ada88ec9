import CSyscalls
import Foundation
import XCTest

/// Images pushed to a real registry (Debian's docker-registry on 127.0.0.1) by skopeo from
/// hand-written OCI layouts, pulled by `proxybundle pull`, and mounted: the view must match
/// kernel overlayfs given the same layer directories (whiteouts converted).
final class PullTests: RegistryTestCase {
    /// skopeo copies `tag` of `layout` to the registry as REPO:TAG; returns the reference.
    func push(_ layout: String, _ tag: String, repository: String = "app", all: Bool = false, format: String? = nil) throws -> String {
        let reference = "\(registry.host)/\(repository):\(tag)"
        let run = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false"] + (all ? ["--all"] : [])
                                    + (format.map { ["--format", $0] } ?? []) + ["oci:\(layout):\(tag)", "docker://\(reference)"])
        guard run.status == 0 else { throw TestFailure("skopeo copy to the registry: \(run.error)") }
        return reference
    }

    func pull(_ reference: String, _ extra: [String] = []) throws -> [String] {
        let run = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--tls-verify=false"] + extra)
        guard run.status == 0 else { throw TestFailure("pull \(reference) (\(run.status)): \(run.error)") }
        XCTAssertEqual(run.error, "proxybundle: \(reference): unverified: the policy /etc/containers/policy.json"
                           + " accepts it without a signature\n", "one line, when standard error is not a terminal")
        return run.output.split(separator: "\n").map(String.init)
    }

    /// A base layer and a hotfix over it (a changed file, a whiteout, an opaque directory),
    /// as gzip and zstd layers.
    func buildLayers() throws -> (base: String, hotfix: String) {
        let base = fx.root + "/src-base", hotfix = fx.root + "/src-hotfix"
        try Disk.write(base + "/a.txt", "base a")
        try Disk.write(base + "/gone.txt", "to be deleted")
        try Disk.write(base + "/d/one", "one", mode: 0o600)
        try Disk.write(base + "/op/x", "hidden by the opaque directory")
        try Disk.symlink(base + "/link", to: "a.txt")
        try Disk.write(base + "/h1", "linked")
        XCTAssertEqual(link(base + "/h1", base + "/h2"), 0)
        XCTAssertEqual(lsetxattr(base + "/a.txt", "user.note", "base", 4, 0), 0)
        XCTAssertEqual(chmod(base + "/d", 0o750), 0)
        try Disk.write(hotfix + "/a.txt", "hotfix a")
        try Disk.whiteout(hotfix, "gone.txt")
        try Disk.write(hotfix + "/op/y", "new in op")
        try Disk.opaque(hotfix + "/op")
        try Disk.write(hotfix + "/new/z", "new")
        try Disk.write(fx.main + "/main.txt", "main")
        try Disk.write(fx.main + "/op/m", "main's, hidden")
        try Disk.write(fx.main + "/gone.txt", "main's, hidden too")
        return (base, hotfix)
    }

    func testAnImageFromARegistryMatchesKernelOverlayfs() throws {
        let (base, hotfix) = try buildLayers()
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "v1", [(try TestImage.tar(of: base), .gzip), (try TestImage.tar(of: hotfix), .zstd)])
        let patches = try pull(try push(layout, "v1"))
        XCTAssertEqual(patches.count, 2)
        XCTAssertTrue(patches.allSatisfy { $0.hasPrefix(store + "/layers/sha256/") }, "\(patches)")
        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution, hotfix, base, fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try fx.start(patches.flatMap { ["--patch", $0] })
        try OverlayTree.assertSame(fx.mountpoint, kernel)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "hotfix a")
        XCTAssertNil(Disk.lstat(fx.inMount("gone.txt")))
        XCTAssertEqual(try Disk.list(fx.inMount("op")), ["y"])
    }

    func testASecondVersionFetchesAndExtractsOnlyTheChangedLayer() throws {
        let (base, hotfix) = try buildLayers()
        let baseTar = try TestImage.tar(of: base), fix1 = try TestImage.tar(of: hotfix)
        try Disk.write(hotfix + "/a.txt", "hotfix a, second version")
        let fix2 = try TestImage.tar(of: hotfix)
        let layout = fx.root + "/layout"
        let image = try TestImage(layout: layout)
        try image.add(tag: "v1", [(baseTar, .gzip), (fix1, .gzip)])
        try image.add(tag: "v2", [(baseTar, .gzip), (fix2, .gzip)])
        let v1 = try pull(try push(layout, "v1"))
        let v2Reference = try push(layout, "v2")
        let baseInode = Disk.lstat(v1[1])?.st_ino
        let before = registry.blobFetches().count
        let v2 = try pull(v2Reference)
        XCTAssertEqual(v2[1], v1[1], "the base layer is shared")
        XCTAssertNotEqual(v2[0], v1[0])
        XCTAssertEqual(Disk.lstat(v2[1])?.st_ino, baseInode, "the base layer was not extracted again")
        let fetched = Set(registry.blobFetches().dropFirst(before))
        XCTAssertTrue(fetched.contains(TestImage.digest(try TestImage.compress(fix2, .gzip))), "\(fetched)")
        XCTAssertFalse(fetched.contains(TestImage.digest(try TestImage.compress(baseTar, .gzip))), "the base blob is not fetched again")
        XCTAssertFalse(fetched.contains(TestImage.digest(try TestImage.compress(fix1, .gzip))))
        XCTAssertLessThanOrEqual(fetched.count, 2, "the new layer and the new config: \(fetched)")
        XCTAssertEqual(try Disk.read(v2[0] + "/a.txt"), "hotfix a, second version")
    }

    /// A Docker v2 manifest, and a multi-platform index of which linux/amd64 is taken.
    func testADockerManifestAndAMultiPlatformIndex() throws {
        let (base, hotfix) = try buildLayers()
        let layout = fx.root + "/layout"
        let image = try TestImage(layout: layout)
        try image.add(tag: "docker", [(try TestImage.tar(of: base), .gzip)])
        let dockerReference = try push(layout, "docker", format: "v2s2")
        let raw = try Spawn.run("/usr/bin/skopeo", ["inspect", "--raw", "--tls-verify=false", "docker://" + dockerReference])
        XCTAssertTrue(raw.output.contains("application/vnd.docker.distribution.manifest.v2+json"), raw.output + raw.error)
        let docker = try pull(dockerReference)
        XCTAssertEqual(docker.count, 1)
        XCTAssertEqual(try Disk.read(docker[0] + "/a.txt"), "base a")

        try Disk.write(hotfix + "/arch", "arm64")
        let arm = try image.manifest([(try TestImage.tar(of: hotfix), .gzip)], architecture: "arm64")
        try Disk.write(hotfix + "/arch", "amd64")
        let amd = try image.manifest([(try TestImage.tar(of: hotfix), .gzip)], architecture: "amd64")
        try image.addIndex(tag: "multi", [arm, amd])
        let multi = try pull(try push(layout, "multi", all: true))
        XCTAssertEqual(multi.count, 1)
        XCTAssertEqual(try Disk.read(multi[0] + "/arch"), "amd64")
    }

    func testAPolicyThatDemandsASignatureRefusesAnUnsignedImage() throws {
        let (base, _) = try buildLayers()
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "v1", [(try TestImage.tar(of: base), .gzip)])
        let reference = try push(layout, "v1")
        let policy = fx.root + "/policy.json"
        try #"{"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"\#(fx.root)/no-such-key.gpg"}]}"#
            .write(toFile: policy, atomically: true, encoding: .utf8)
        let run = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--tls-verify=false", "--policy", policy])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.error.split(separator: "\n").count, 1, run.error)
        XCTAssertTrue(run.error.contains("\(reference): refused by the policy \(policy): it is not signed"), run.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])
    }

    /// A registry that serves a layer blob other than the one its digest names: the pull
    /// fails in one line naming the reference, and nothing is left in the store's layers.
    func testABlobThatDoesNotMatchItsDigestIsRefused() throws {
        let (base, _) = try buildLayers()
        let layout = fx.root + "/layout"
        let tar = try TestImage.tar(of: base)
        try TestImage(layout: layout).add(tag: "v1", [(tar, .gzip)])
        let reference = try push(layout, "v1")
        let digest = TestImage.digest(try TestImage.compress(tar, .gzip))
        let hex = String(digest.dropFirst(7))
        let stored = registry.directory + "/data/docker/registry/v2/blobs/sha256/\(hex.prefix(2))/\(hex)/data"
        var damaged = Array(try Data(contentsOf: URL(fileURLWithPath: stored)))
        damaged[damaged.count / 2] ^= 0xff
        try Data(damaged).write(to: URL(fileURLWithPath: stored))
        let run = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--tls-verify=false"])
        XCTAssertEqual(run.status, 1, run.error)
        XCTAssertEqual(run.error.split(separator: "\n").count, 1, run.error)
        XCTAssertTrue(run.error.contains(reference) && run.error.contains("igest"), run.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])
        XCTAssertEqual(try Disk.list(store + "/layers/tmp"), [])
    }

    /// A registry with TLS from a test CA and basic auth: reached with --cert-dir and
    /// --authfile (as every container tool takes them); without either, one line that says why.
    func testARegistryWithTLSAndAuthIsReachedThroughSkopeosSettings() throws {
        registry.stop()
        registry = try Registry.start(in: fx.root + "/secure", secure: true)
        let started = registry
        addTeardownBlock { started?.stop() }
        let (base, _) = try buildLayers()
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "v1", [(try TestImage.tar(of: base), .gzip)])
        let reference = "\(registry.host)/app:v1"
        let copied = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-cert-dir", registry.certificates,
                                                       "--dest-creds", "\(Registry.user):\(Registry.password)",
                                                       "oci:\(layout):v1", "docker://" + reference])
        XCTAssertEqual(copied.status, 0, copied.error)
        let auth = fx.root + "/auth.json"
        try registry.authFile(at: auth)

        let untrusted = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--authfile", auth])
        XCTAssertEqual(untrusted.status, 1)
        XCTAssertEqual(untrusted.error.split(separator: "\n").count, 1, untrusted.error)
        XCTAssertTrue(untrusted.error.contains(reference) && untrusted.error.contains("certificate"), untrusted.error)
        let anonymous = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--cert-dir", registry.certificates])
        XCTAssertEqual(anonymous.status, 1)
        XCTAssertEqual(anonymous.error.split(separator: "\n").count, 1, anonymous.error)
        XCTAssertTrue(anonymous.error.contains("authentication required") || anonymous.error.contains("unauthorized"), anonymous.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])

        let layers = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--cert-dir", registry.certificates,
                                                         "--authfile", auth])
        XCTAssertEqual(layers.status, 0, layers.error)
        XCTAssertEqual(try Disk.read(layers.output.trimmingCharacters(in: .newlines) + "/a.txt"), "base a")
    }

    /// A registry that loses a blob, then stops: each pull fails in one line naming the
    /// reference and leaves no layer; once the blob is back, the pull completes.
    func testARegistryThatFailsMidPullLeavesNoLayer() throws {
        let (base, hotfix) = try buildLayers()
        let layout = fx.root + "/layout"
        let baseTar = try TestImage.tar(of: base), fixTar = try TestImage.tar(of: hotfix)
        try TestImage(layout: layout).add(tag: "v1", [(baseTar, .gzip), (fixTar, .gzip)])
        let reference = try push(layout, "v1")
        let hex = String(TestImage.digest(try TestImage.compress(fixTar, .gzip)).dropFirst(7))
        let blob = registry.directory + "/data/docker/registry/v2/blobs/sha256/\(hex.prefix(2))/\(hex)/data"
        XCTAssertEqual(rename(blob, blob + ".away"), 0)
        let lost = try Spawn.run(MountFixture.binary, ["pull", reference, "--store", store, "--tls-verify=false"])
        XCTAssertEqual(lost.status, 1)
        XCTAssertEqual(lost.error.split(separator: "\n").count, 1, lost.error)
        XCTAssertTrue(lost.error.contains("skopeo could not copy docker://\(reference)"), lost.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])
        XCTAssertEqual(rename(blob + ".away", blob), 0)
        XCTAssertEqual(try pull(reference).count, 2)

        registry.stop()
        let stopped = try Spawn.run(MountFixture.binary, ["pull", reference.replacingOccurrences(of: ":v1", with: ":v2"),
                                                          "--store", store, "--tls-verify=false"])
        XCTAssertEqual(stopped.status, 1)
        XCTAssertEqual(stopped.error.split(separator: "\n").count, 1, stopped.error)
        XCTAssertTrue(stopped.error.contains("connection refused"), stopped.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256").count, 2, "the layers pulled before are kept")
    }
}
