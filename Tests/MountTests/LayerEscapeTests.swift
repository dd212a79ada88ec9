import CSyscalls
import Foundation
import XCTest

/// Untrusted layers (crafted tars, pulled from an OCI layout through skopeo's `oci:`
/// transport): every way out of the layer's directory is refused with one line naming the
/// entry and the rule, and a refused layer leaves nothing in the store or outside it.
final class LayerEscapeTests: XCTestCase {
    var fx: MountFixture!
    var store: String { fx.root + "/store" }
    /// A directory outside the layer that no entry may reach.
    var outside: String { fx.root + "/outside" }

    override func setUpWithError() throws {
        fx = try MountFixture(name)
        try Disk.mkdir(outside)
    }

    override func tearDown() { fx?.tearDown() }

    /// Pulls a one-layer image of `tar` (ended here) with `extra` options.
    func pull(_ tar: CraftedTar, _ extra: [String] = [], compression: TestImage.Compression = .gzip) throws
        -> (status: Int32, output: String, error: String) {
        var tar = tar
        tar.end()
        let layout = fx.root + "/layout-\(UInt32.random(in: 0...UInt32.max))"
        try TestImage(layout: layout).add(tag: "t", [(tar.bytes, compression)])
        return try Spawn.run(MountFixture.binary, ["pull", "oci:\(layout):t", "--store", store] + extra)
    }

    /// The layer is refused: exit status 1, one line naming `entry` and `rule`, nothing left in
    /// the store's layers or under `outside`.
    func assertRefused(_ tar: CraftedTar, entry: String, rule: String, _ extra: [String] = [],
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let run = try pull(tar, extra)
        XCTAssertEqual(run.status, 1, run.error, file: file, line: line)
        let lines = run.error.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, run.error, file: file, line: line)
        XCTAssertTrue(run.error.contains("'\(entry)'") || run.error.contains("'\(entry)..."), "the line names the entry: \(run.error)", file: file, line: line)
        XCTAssertTrue(run.error.contains(rule), "the line names the rule (\(rule)): \(run.error)", file: file, line: line)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [], "a refused layer is not in the store", file: file, line: line)
        XCTAssertEqual(try Disk.list(store + "/layers/tmp"), [], "a refused layer leaves no temporary directory", file: file, line: line)
        XCTAssertEqual(try Disk.list(outside), [], "nothing was written outside the layer", file: file, line: line)
        XCTAssertEqual(run.output, "", file: file, line: line)
    }

    func testAnAbsoluteNameIsRefused() throws {
        var tar = CraftedTar()
        tar.add("ok", content: Array("fine".utf8))
        tar.add(outside + "/owned", content: Array("x".utf8))
        try assertRefused(tar, entry: outside + "/owned", rule: "an absolute name is refused")
    }

    func testDotDotIsRefused() throws {
        var tar = CraftedTar()
        tar.add("a/", .directory, mode: 0o755)
        tar.add("a/../../outside/owned", content: Array("x".utf8))
        try assertRefused(tar, entry: "a/../../outside/owned", rule: "a name holding '..' is refused")
    }

    func testASymlinkFollowedAsAParentIsRefused() throws {
        for target in [outside, "../../../outside", "."] {
            var tar = CraftedTar()
            tar.add("a", .symlink, link: target)
            tar.add("a/owned", content: Array("x".utf8))
            try assertRefused(tar, entry: "a/owned", rule: "a parent in its name is a symlink")
        }
    }

    func testAFileParentIsRefused() throws {
        var tar = CraftedTar()
        tar.add("f", content: Array("x".utf8))
        tar.add("f/g", content: Array("y".utf8))
        try assertRefused(tar, entry: "f/g", rule: "a parent in its name is not a directory")
    }

    func testHardLinksOutOfTheLayerAreRefused() throws {
        try Disk.write(fx.root + "/secret", "secret")
        var absolute = CraftedTar()
        absolute.add("h", .hardLink, link: fx.root + "/secret")
        try assertRefused(absolute, entry: "h", rule: "an absolute link target is refused")
        var dotdot = CraftedTar()
        dotdot.add("h", .hardLink, link: "../../secret")
        try assertRefused(dotdot, entry: "h", rule: "a link target holding '..' is refused")
        var missing = CraftedTar()
        missing.add("h", .hardLink, link: "not-in-the-layer")
        try assertRefused(missing, entry: "h", rule: "a hard link to a name not in the layer is refused")
        var throughSymlink = CraftedTar()
        throughSymlink.add("s", .symlink, link: fx.root)
        throughSymlink.add("h", .hardLink, link: "s/secret")
        try assertRefused(throughSymlink, entry: "h", rule: "a parent in its link target is a symlink")
    }

    func testOverLongNamesAndPathsAreRefused() throws {
        let longName = String(repeating: "n", count: 256)
        var name = CraftedTar()
        name.add("x", content: [], pax: [("path", "d/" + longName)])
        try assertRefused(name, entry: String(("d/" + longName).prefix(200)), rule: "a component of its name is longer than 255 bytes")
        let longPath = Array(repeating: String(repeating: "p", count: 200), count: 21).joined(separator: "/")
        var path = CraftedTar()
        path.addLongName(longPath)
        path.add("x", content: [])
        try assertRefused(path, entry: String(longPath.prefix(200)), rule: "its name is longer than 4095 bytes")
    }

    func testOverlayAttributesAreRefused() throws {
        for attribute in ["trusted.overlay.opaque", "user.overlay.opaque"] {
            var tar = CraftedTar()
            tar.add("d", .directory, mode: 0o755, pax: [("SCHILY.xattr." + attribute, "y")])
            try assertRefused(tar, entry: "d", rule: "the extended attribute \(attribute) is refused")
        }
    }

    func testLimitsStopALayer() throws {
        var many = CraftedTar()
        for i in 0..<5 { many.add("f\(i)", content: []) }
        try assertRefused(many, entry: "f3", rule: "more than 3 entries (--max-entries)", ["--max-entries", "3"])
        var large = CraftedTar()
        large.add("big", content: [UInt8](repeating: 7, count: 1 << 20))
        let run = try pull(large, ["--max-size", "65536"])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.error.contains("larger than 65536 bytes uncompressed (--max-size)"), run.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])
        XCTAssertEqual(try Disk.list(store + "/layers/tmp"), [])
    }

    func testADamagedHeaderIsRefused() throws {
        var tar = CraftedTar()
        tar.add("fine", content: Array("x".utf8))
        tar.add("bad", content: Array("y".utf8), corrupt: true)
        try assertRefused(tar, entry: "bad", rule: "its header checksum is wrong")
    }

    /// Devices, FIFOs and set-ID bits are dropped unless --allow-special as root; user.*
    /// attributes are kept and others dropped; long names and hard links inside the layer work.
    func testWhatALayerMayHoldIsExtracted() throws {
        let deep = Array(repeating: "segment-of-a-long-path", count: 8).joined(separator: "/")
        var tar = CraftedTar()
        tar.add("dev", .characterDevice, mode: 0o600, device: (1, 3))
        tar.add("pipe", .fifo, mode: 0o600)
        tar.add("suid", content: Array("#!/bin/sh\n".utf8), mode: 0o6755)
        tar.add("noted", content: Array("n".utf8), pax: [("SCHILY.xattr.user.note", "kept"), ("SCHILY.xattr.security.x", "dropped")])
        tar.addLongName(deep + "/gnu")
        tar.add("ignored", content: Array("gnu".utf8))
        tar.add("ignored", content: Array("pax".utf8), pax: [("path", deep + "/pax")])
        tar.add("linked", .hardLink, link: "noted")
        let run = try pull(tar)
        XCTAssertEqual(run.status, 0, run.error)
        let layer = run.output.trimmingCharacters(in: .newlines)
        XCTAssertNil(Disk.lstat(layer + "/dev"))
        XCTAssertNil(Disk.lstat(layer + "/pipe"))
        XCTAssertEqual(Disk.lstat(layer + "/suid").map { $0.st_mode & 0o7777 }, 0o755)
        XCTAssertEqual(try Disk.read(layer + "/" + deep + "/gnu"), "gnu")
        XCTAssertEqual(try Disk.read(layer + "/" + deep + "/pax"), "pax")
        XCTAssertEqual(Disk.lstat(layer + "/linked")?.st_ino, Disk.lstat(layer + "/noted")?.st_ino)
        var value = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(lgetxattr(layer + "/noted", "user.note", &value, value.count), 4)
        XCTAssertEqual(lgetxattr(layer + "/noted", "security.x", &value, value.count), -1)

        guard geteuid() == 0 else { return }
        let asNobody = try Spawn.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", MountFixture.binary,
                                                          "pull", "oci:/nonexistent:t", "--store", fx.root + "/nobody", "--allow-special"])
        XCTAssertEqual(asNobody.status, 64, asNobody.error)
        XCTAssertTrue(asNobody.error.contains("--allow-special is for root only"), asNobody.error)
        try FileManager.default.removeItem(atPath: store)
        let special = try pull(tar, ["--allow-special"])
        XCTAssertEqual(special.status, 0, special.error)
        let kept = special.output.trimmingCharacters(in: .newlines)
        XCTAssertEqual(Disk.lstat(kept + "/dev").map { $0.st_mode & S_IFMT }, S_IFCHR)
        XCTAssertEqual(Disk.lstat(kept + "/pipe").map { $0.st_mode & S_IFMT }, S_IFIFO)
        XCTAssertEqual(Disk.lstat(kept + "/suid").map { $0.st_mode & 0o7777 }, 0o6755)
    }

    /// A gzip blob cut short (its digest that of the short bytes, so only the decoder can tell).
    func testATruncatedBlobLeavesNothing() throws {
        var tar = CraftedTar()
        tar.add("big", content: (0..<(1 << 18)).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) })
        tar.end()
        let whole = try TestImage.compress(tar.bytes, .gzip)
        let layout = fx.root + "/layout"
        let image = try TestImage(layout: layout)
        try image.add(tag: "t", [(tar.bytes, .gzip)])
        // the layer's blob replaced by its first half, the manifest rewritten to name it
        let half = Array(whole.prefix(whole.count / 2))
        let manifestPath = try FileManager.default.contentsOfDirectory(atPath: layout + "/blobs/sha256").map { layout + "/blobs/sha256/" + $0 }
            .first { (try? String(contentsOfFile: $0, encoding: .utf8))?.contains("\"config\":") == true }
        guard let manifestPath else { throw TestFailure("no manifest") }
        let manifest = try String(contentsOfFile: manifestPath, encoding: .utf8)
            .replacingOccurrences(of: TestImage.digest(whole), with: TestImage.digest(half))
            .replacingOccurrences(of: "\"size\":\(whole.count)", with: "\"size\":\(half.count)")
        let cut = try TestImage(layout: fx.root + "/cut")
        try cut.blob(half)
        try FileManager.default.copyItem(atPath: layout + "/blobs/sha256/" + (try config(in: manifest)), toPath: fx.root + "/cut/blobs/sha256/" + (try config(in: manifest)))
        let stored = try cut.blob(Array(manifest.utf8))
        try #"{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"\#(stored.digest)","size":\#(stored.size),"annotations":{"org.opencontainers.image.ref.name":"t"}}]}"#
            .write(toFile: fx.root + "/cut/index.json", atomically: true, encoding: .utf8)
        let run = try Spawn.run(MountFixture.binary, ["pull", "oci:\(fx.root)/cut:t", "--store", store])
        XCTAssertEqual(run.status, 1, run.error)
        XCTAssertEqual(run.error.split(separator: "\n").count, 1, run.error)
        XCTAssertTrue(run.error.contains("is damaged") || run.error.contains("truncated"), run.error)
        XCTAssertEqual(try Disk.list(store + "/layers/sha256"), [])
        XCTAssertEqual(try Disk.list(store + "/layers/tmp"), [])
    }

    /// A store on a small tmpfs: the layer that does not fit is refused in one line and
    /// leaves nothing.
    func testAFullDiskLeavesNothing() throws {
        let small = fx.root + "/small"
        try Disk.mkdir(small)
        guard mount("tmpfs", small, "tmpfs", 0, "size=1m") == 0 else { throw TestFailure("mount tmpfs: \(errno)") }
        defer { umount2(small, Int32(MNT_DETACH)) }
        var tar = CraftedTar()
        tar.add("zeros", content: [UInt8](repeating: 0, count: 2 << 20))
        tar.end()
        let layout = fx.root + "/layout"
        try TestImage(layout: layout).add(tag: "t", [(tar.bytes, .gzip)])
        let run = try Spawn.run(MountFixture.binary, ["pull", "oci:\(layout):t", "--store", small + "/store"])
        XCTAssertEqual(run.status, 1, run.error)
        XCTAssertEqual(run.error.split(separator: "\n").count, 1, run.error)
        XCTAssertTrue(run.error.contains("No space left on device") && run.error.contains("'zeros'"), run.error)
        XCTAssertEqual(try Disk.list(small + "/store/layers/sha256"), [])
        XCTAssertEqual(try Disk.list(small + "/store/layers/tmp"), [])
    }

    private func config(in manifest: String) throws -> String {
        guard let range = manifest.range(of: #""config":\{[^}]*"digest":"sha256:([0-9a-f]{64})""#, options: .regularExpression)
        else { throw TestFailure("no config in \(manifest)") }
        return String(manifest[range].suffix(65).prefix(64))
    }
}
