@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The layer stack on plain directories: which layers may stack, how their inode numbers are
/// told apart, names read from every layer, and patches replaced in place.
final class LayerStackTests: OverlayTestCase {
    func testTheSameDirectoryTwiceOrOneLayerInsideAnotherIsRefused() throws {
        try mkdir(.main, "inner")
        let main = try Layer(path: mainRoot)
        let substitution = try Layer(path: patchRoot)
        let outside = try Layer(path: outsideRoot)
        XCTAssertNoThrow(try LayerStack(substitution: Substitution(substitution, writable: false), patches: [outside], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: Substitution(substitution, writable: false), patches: [try Layer(path: mainRoot)], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: Substitution(substitution, writable: false), patches: [outside, outside], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: Substitution(substitution, writable: false), patches: [try Layer(path: mainRoot + "/inner")], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: Substitution(substitution, writable: false), patches: [try Layer(path: "/tmp")], main: main),
                    "a layer holding the others")
    }

    /// A stack without a substitution: its top patch is layer 0, reads merge as usual, every
    /// change answers EROFS, a remount to read-write is refused, and nothing is made in any
    /// layer (no work area).
    func testAStackWithoutASubstitutionReadsAndNeverWrites() throws {
        try write(.main, "a", "main")
        try write(.main, "b", "main")
        try mkdir(.patch, "d")
        try write(.patch, "a", "patch")
        let stack = try LayerStack(substitution: nil, patches: [try Layer(path: patchRoot)], main: try Layer(path: mainRoot))
        XCTAssertEqual(stack.count, 2)
        XCTAssertEqual(stack.role(0), .patch)
        XCTAssertEqual(stack.role(1), .main)
        XCTAssertEqual(stack.patches.count, 1)
        let overlay = try Overlay(layers: stack)
        XCTAssertFalse(overlay.isWritable)
        let a = try lookup(overlay, "a")
        let fd = try overlay.openFile(Request(overlay), a.node, flags: O_RDONLY)
        var buffer = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(read(fd.fd, &buffer, 16), 5)
        overlay.release(a.node, fd: fd.fd)
        XCTAssertEqual(Array(buffer.prefix(5)), Array("patch".utf8))
        let me = Requester(uid: getuid(), gid: getgid(), groups: [])
        assertErrno(EROFS, try overlay.create(Request(overlay, owner: me), .file(mode: 0o644, flags: O_WRONLY), named: n("new"), in: rootNodeID))
        assertErrno(EROFS, try overlay.openFile(Request(overlay), try lookup(overlay, "b").node, flags: O_WRONLY))
        assertErrno(EROFS, try overlay.setWritable(true))
        XCTAssertNoThrow(try overlay.setWritable(false))
        overlay.close()
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: patchRoot).sorted(), ["a", "d"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mainRoot).sorted(), ["a", "b"])
    }

    /// A list of layers is checked in one sort, told by position: the same directory, one
    /// inside another (not merely sharing a prefix of its name), the later position first.
    func testALayerListNamesItsFirstProblemByPosition() {
        func problem(_ paths: [String]) -> LayerList.Problem? { LayerList.problem(paths.map { RawPath($0) }) }
        XCTAssertNil(problem(["/a", "/b", "/a-b", "/ab/c", "/b2"]))
        XCTAssertEqual(problem(["/a", "/b", "/a"]), .same(0, 2))
        XCTAssertEqual(problem(["/x/y", "/a", "/x"]), .inside(0, 2))
        XCTAssertEqual(problem(["/x", "/a", "/x/y/z"]), .inside(2, 0))
        XCTAssertEqual(problem(["/p", "/q", "/q/r", "/p"]), .inside(2, 1), "the problem whose later layer comes first")
        XCTAssertEqual(problem(["/a", "/a-b", "/a/c"]), .inside(2, 0), "a descendant sorted apart from its ancestor by name")
        XCTAssertEqual(problem(["/", "/a"]), .inside(1, 0))
        let many = (0..<10_000).map { "/layers/\($0)" }
        XCTAssertNil(problem(many))
        XCTAssertEqual(problem(many + ["/layers/42/inner"]), .inside(10_000, 42))
    }

    /// Far more than 255 layers stack (a layer is numbered by two bytes); past the limit, E2BIG.
    func testThousandsOfLayersStackAndTheLimitHolds() throws {
        let base = try makeTemporaryDirectory("many")
        var patches: [Layer] = []
        for index in 0..<300 {
            let path = base + "/\(index)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: path + "/only\(index)", contents: Data("\(index)".utf8)))
            XCTAssertTrue(FileManager.default.createFile(atPath: path + "/shared", contents: Data("\(index)".utf8)))
            patches.append(try Layer(path: path))
        }
        let overlay = try Overlay(main: Layer(path: mainRoot), patches: patches, substitution: Layer(path: patchRoot),
                                  writable: false, cachesLookups: true)
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "only299").node), "299", "the 300th patch's own file")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "shared").node), "0", "the first patch wins")
        XCTAssertEqual(try overlay.listDirectory(Request(overlay), rootNodeID).named.filter { $0.0.starts(with: Array("only".utf8)) }.count, 300)
        XCTAssertEqual(LayerStack.limit, LayerList.patchLimit + 2)
        let one = try Layer(path: base + "/0")
        let tooMany = Array(repeating: one, count: LayerList.patchLimit + 1)
        assertErrno(E2BIG, try LayerStack(substitution: Substitution(Layer(path: patchRoot), writable: false), patches: tooMany, main: Layer(path: mainRoot)))
    }

    /// The main bundle's file system shows its own numbers; each other one gets a tag of its own
    /// in the top bits, kept when more are added.
    func testInodeTagsAreOnePerFileSystemAndKept() throws {
        var numbers = InodeNumbers(main: 10)
        XCTAssertEqual(numbers.tag(10), 0)
        XCTAssertEqual(numbers.tag(99), 0, "alone, nothing is tagged")
        numbers.register(try LayerStack(substitution: Substitution(Layer(path: patchRoot), writable: false), main: Layer(path: mainRoot)))
        let shm = try makeTemporaryDirectory("shm", under: "/dev/shm")
        let tmpfs = try Layer(path: shm)
        try XCTSkipIf(tmpfs.device == (try Layer(path: mainRoot)).device, "/dev/shm is on the main bundle's file system")
        var two = InodeNumbers(main: 10)
        two.register(try LayerStack(substitution: Substitution(Layer(path: patchRoot), writable: false), patches: [tmpfs], main: Layer(path: mainRoot)))
        XCTAssertEqual(two.devices.count, 3)
        XCTAssertEqual(two.tag(two.devices[1]), 1 << 63)
        XCTAssertEqual(two.tag(two.devices[2]), 1 << 62)
        XCTAssertEqual(two.number(5, device: two.devices[2]), (1 << 62) | 5)
        let before = two.devices
        two.register(try LayerStack(substitution: Substitution(Layer(path: patchRoot), writable: false), main: Layer(path: mainRoot)))
        XCTAssertEqual(two.devices, before, "a file system keeps its tag for the daemon's life")
    }

    /// A name missing from a directory whose names were read costs no system call, whatever the
    /// number of layers: every layer's names are read.
    func testMissesInADirectoryOfFourLayersAreAnsweredFromEveryLayersNames() throws {
        let p1 = try makeTemporaryDirectory("p1"), p2 = try makeTemporaryDirectory("p2")
        for (root, name) in [(mainRoot, "m"), (p2, "two"), (p1, "one"), (patchRoot, "s")] {
            try FileManager.default.createDirectory(atPath: root + "/d", withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: root + "/d/" + name, contents: Data(name.utf8)))
        }
        let overlay = try Overlay(main: Layer(path: mainRoot), patches: [Layer(path: p1), Layer(path: p2)],
                                  substitution: Layer(path: patchRoot), writable: true, cachesLookups: true)
        for index in 0..<KnownNames.missesBeforeReading { assertErrno(ENOENT, try lookup(overlay, "d/missing\(index)")) }
        for name in ["m", "two", "one", "s"] { XCTAssertNoThrow(try lookup(overlay, "d/" + name), name) }
        XCTAssertTrue(FileManager.default.createFile(atPath: p2 + "/d/late", contents: Data("late".utf8)))
        assertErrno(ENOENT, try lookup(overlay, "d/late"), "answered from the names read: no look at the disk")
        _ = try overlay.invalidate()
        XCTAssertEqual(try lookup(overlay, "d/late").attributes.st_size, 4)
    }

    /// Replacing the patches changes the view at once, also of what was cached; the
    /// substitution's own entries and those made through the overlay stay.
    func testReplacingThePatchesChangesWhatIsCached() throws {
        let p1 = try makeTemporaryDirectory("p1"), p2 = try makeTemporaryDirectory("p2")
        try write(.main, "icon", "main")
        XCTAssertTrue(FileManager.default.createFile(atPath: p1 + "/icon", contents: Data("p1".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: p2 + "/.wh.icon", contents: Data()))
        XCTAssertTrue(FileManager.default.createFile(atPath: p2 + "/extra", contents: Data("p2".utf8)))
        let overlay = try Overlay(main: Layer(path: mainRoot), patches: [Layer(path: p1)],
                                  substitution: Layer(path: patchRoot), writable: true, cachesLookups: true)
        let icon = try lookup(overlay, "icon")
        XCTAssertEqual(try readContent(overlay, icon.node), "p1")
        assertErrno(ENOENT, try lookup(overlay, "extra"))
        _ = try overlay.replacePatches([Layer(path: p2)])
        assertErrno(ENOENT, try lookup(overlay, "icon"), "p2 whites out main's icon")
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "extra").node), "p2")
        XCTAssertEqual(String(decoding: overlay.layersText, as: UTF8.self), "substitution \(patchRoot)\npatch \(p2)\nmain \(mainRoot)\n")
        _ = try overlay.replacePatches([])
        XCTAssertEqual(try readContent(overlay, try lookup(overlay, "icon").node), "main")
        assertErrno(EINVAL, try overlay.replacePatches([Layer(path: mainRoot)]))
        XCTAssertEqual(String(decoding: overlay.layersText, as: UTF8.self), "substitution \(patchRoot)\nmain \(mainRoot)\n", "nothing changed")
    }
}
