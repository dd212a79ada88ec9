import CSyscalls
import Foundation
import XCTest

/// `layers --set-image`, `--rollback` and `--history` on a live mount, with images from a real
/// registry: the view switches in one step while readers loop, and goes back.
final class ImageSwitchTests: RegistryTestCase {
    /// v1 and v2 of an image: a shared base layer under a hotfix that differs.
    func pushTwoVersions() throws -> (v1: String, v2: String, base: String, hotfix: String) {
        let base = fx.root + "/src-base", hotfix = fx.root + "/src-hotfix"
        for i in 0..<20 { try Disk.write(base + "/files/\(i)", "base \(i)") }
        try Disk.write(base + "/gone.txt", "deleted by v2")
        try Disk.write(hotfix + "/a.txt", "v1")
        for i in 0..<20 { try Disk.write(hotfix + "/files/\(i)", "v1 \(i)") }
        let layout = fx.root + "/layout"
        let image = try TestImage(layout: layout)
        let baseTar = try TestImage.tar(of: base)
        try image.add(tag: "v1", [(baseTar, .gzip), (try TestImage.tar(of: hotfix), .gzip)])
        try Disk.write(hotfix + "/a.txt", "v2")
        for i in 0..<20 { try Disk.write(hotfix + "/files/\(i)", "v2 \(i)") }
        try Disk.whiteout(hotfix, "gone.txt")
        try image.add(tag: "v2", [(baseTar, .gzip), (try TestImage.tar(of: hotfix), .zstd)])
        var references: [String] = []
        for tag in ["v1", "v2"] {
            let reference = "\(registry.host)/app:\(tag)"
            let run = try Spawn.run("/usr/bin/skopeo", ["copy", "--quiet", "--dest-tls-verify=false", "oci:\(layout):\(tag)", "docker://\(reference)"])
            guard run.status == 0 else { throw TestFailure("skopeo copy: \(run.error)") }
            references.append(reference)
        }
        return (references[0], references[1], base, hotfix)
    }

    func layers(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint] + arguments + ["--store", store, "--tls-verify=false"])
    }

    func testSetImageSwitchesWhileReadersLoopAndRollsBack() throws {
        let (v1, v2, base, hotfix) = try pushTwoVersions()
        try Disk.write(fx.main + "/main.txt", "main")
        try fx.start()
        let first = try layers(["--set-image", v1])
        XCTAssertEqual(first.status, 0, first.error)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1")
        XCTAssertEqual(try Disk.read(fx.inMount("gone.txt")), "deleted by v2")

        // readers loop over every file while the mount switches to v2
        let readers = VersionReaders(fx.mountpoint, readers: 3, versions: ["v1", "v2"])
        let second = try layers(["--set-image", v2])
        let failure = readers.stop()
        XCTAssertEqual(second.status, 0, second.error)
        XCTAssertNil(failure, "every read sees the old or the new version")
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v2", "every open after the command sees the new layers")
        XCTAssertNil(Disk.lstat(fx.inMount("gone.txt")))
        XCTAssertEqual(second.output.split(separator: "\n").filter { $0.hasPrefix("patch ") }.count, 2, second.output)

        let kernel = fx.root + "/kernel"
        try KernelOverlay.mountStack([fx.substitution, hotfix, base, fx.main], at: kernel, scratch: fx.root + "/converted")
        defer { Unmounter.force(kernel) }
        try OverlayTree.assertSame(fx.mountpoint, kernel)

        let status = try Spawn.run(MountFixture.binary, ["status", fx.mountpoint])
        XCTAssertTrue(status.output.contains("  image: \(v2) sha256:"), status.output)
        XCTAssertTrue(status.output.contains("(2 of the patches)"), status.output)
        let json = try Spawn.run(MountFixture.binary, ["status", fx.mountpoint, "--json"])
        XCTAssertTrue(json.output.contains(#""images":[{"reference":"\#(v2)","manifest":"sha256:"#), json.output)

        let which = try Spawn.run(MountFixture.binary, ["which", fx.inMount("a.txt")])
        let answer = which.output.split(separator: "\n")
        XCTAssertEqual(answer.count, 2, which.output + which.error)
        XCTAssertTrue(answer.first?.hasPrefix("patch \(store)/layers/sha256/") == true, which.output)
        XCTAssertTrue(answer.last?.hasPrefix("image \(v2) sha256:") == true, which.output)
        XCTAssertEqual(try Spawn.run(MountFixture.binary, ["which", fx.inMount("main.txt")]).output, "main \(fx.main)/main.txt\n")

        let history = try layers(["--history"])
        let lines = history.output.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, history.output)
        XCTAssertTrue(lines.first?.contains(v1) == true && lines.last?.contains(v2) == true, history.output)
        XCTAssertTrue(lines.last?.hasSuffix("(current)") == true, history.output)
        let again = try layers(["--set-image", v2])
        XCTAssertEqual(again.status, 0, again.error)
        XCTAssertEqual(try layers(["--history"]).output, history.output, "a tag that has not moved adds no entry")

        let back = try layers(["--rollback"])
        XCTAssertEqual(back.status, 0, back.error)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1")
        XCTAssertEqual(try Disk.read(fx.inMount("files/3")), "v1 3")
        let after = try layers(["--history"]).output.split(separator: "\n")
        XCTAssertTrue(after.first?.hasSuffix("(current)") == true && after.last?.hasSuffix("(rolled back)") == true, "\(after)")

        let none = try layers(["--rollback"])
        XCTAssertEqual(none.status, 1)
        XCTAssertEqual(none.error.split(separator: "\n").count, 1, none.error)
        XCTAssertTrue(none.error.contains("no earlier image"), none.error)
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1", "a refused rollback changes nothing")
    }

    /// `which` names the images of every patch it names: for a directory merged from several
    /// layers too, and for a patch that is a directory inside a layer.
    func testWhichNamesTheImagesOfAMergedDirectory() throws {
        let (v1, v2, _, _) = try pushTwoVersions()
        try fx.start()
        XCTAssertEqual(try layers(["--set-image", v2]).status, 0)
        let which = { (path: String) throws -> [String] in
            let run = try Spawn.run(MountFixture.binary, ["which", self.fx.inMount(path)])
            XCTAssertEqual(run.status, 0, run.error)
            return run.output.split(separator: "\n").map(String.init)
        }
        let merged = try which("files")
        XCTAssertEqual(merged.count, 2, "\(merged)")
        XCTAssertTrue(merged.first?.hasPrefix("merged patch \(store)/layers/sha256/") == true, "\(merged)")
        XCTAssertTrue(merged.last?.hasPrefix("image \(v2) sha256:") == true, "\(merged)")

        // a plain patch above the image's layers: merged from three patches, one image
        let plain = fx.root + "/plain"
        try Disk.write(plain + "/files/extra", "extra")
        let v2Layers = try layers([]).output.split(separator: "\n").filter { $0.hasPrefix("patch ") }.map { String($0.dropFirst(6)) }
        XCTAssertEqual(try layers(["--set", plain] + v2Layers).status, 0)
        let mixed = try which("files")
        XCTAssertEqual(mixed.count, 2, "\(mixed)")
        XCTAssertTrue(mixed.first?.hasPrefix("merged patch \(plain)/files patch \(store)/layers/sha256/") == true, "\(mixed)")
        XCTAssertTrue(mixed.last?.hasPrefix("image \(v2) sha256:") == true, "\(mixed)")

        // v1's top layer's `files` directory as a patch over v2's layers: two images
        let v1Top = try Spawn.run(MountFixture.binary, ["pull", v1, "--store", store, "--tls-verify=false"])
            .output.split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertEqual(try layers(["--set", v1Top + "/files"] + v2Layers).status, 0)
        let file = try which("3")
        XCTAssertEqual(file.count, 2, "\(file)")
        XCTAssertEqual(file.first, "patch \(v1Top)/files/3")
        XCTAssertTrue(file.last?.hasPrefix("image \(v1) sha256:") == true, "\(file)")
        let root = try which("")
        XCTAssertEqual(root.filter { $0.hasPrefix("image ") }.count, 2, "\(root)")
        XCTAssertTrue(root.contains { $0.hasPrefix("image \(v1) ") } && root.contains { $0.hasPrefix("image \(v2) ") }, "\(root)")
    }

    /// `-o image=`: pulled on the first mount (the registry reached through the registries.conf
    /// skopeo finds in $HOME), from the store on the next, with the registry gone.
    func testAMountOfAnImageBootsOfflineFromTheStore() throws {
        let (v1, _, _, _) = try pushTwoVersions()
        let home = fx.root + "/home"
        try Disk.write(home + "/.config/containers/registries.conf",
                       "[[registry]]\nlocation = \"\(registry.host)\"\ninsecure = true\n")
        fx.environment = ["HOME=\(home)"]
        try fx.start(["-o", "image=\(v1),store=\(store)"])
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1")
        XCTAssertEqual(try Disk.read(fx.inMount("files/7")), "v1 7")
        fx.stop()
        registry.stop()
        try fx.start(["-o", "image=\(v1),store=\(store)"])
        XCTAssertEqual(try Disk.read(fx.inMount("a.txt")), "v1", "mounted from the store, offline")
        let history = try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint, "--history", "--store", store])
        XCTAssertEqual(history.output.split(separator: "\n").count, 1, "the same image is one entry: \(history.output)")
        let status = try Spawn.run(MountFixture.binary, ["layers", fx.mountpoint])
        XCTAssertEqual(status.output.split(separator: "\n").filter { $0.hasPrefix("patch \(store)/layers/sha256/") }.count, 2,
                       status.output)
    }
}

/// A value set once from any thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var text: String?
    var value: String? { lock.withLock { text } }
    var isSet: Bool { value != nil }
    func set(_ value: String) { lock.withLock { if text == nil { text = value } } }
}
