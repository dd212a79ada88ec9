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
        XCTAssertNoThrow(try LayerStack(substitution: substitution, patches: [outside], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: substitution, patches: [try Layer(path: mainRoot)], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: substitution, patches: [outside, outside], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: substitution, patches: [try Layer(path: mainRoot + "/inner")], main: main))
        assertErrno(EINVAL, try LayerStack(substitution: substitution, patches: [try Layer(path: "/tmp")], main: main),
                    "a layer holding the others")
    }

    /// The main bundle's file system shows its own numbers; each other one gets a tag of its own
    /// in the top bits, kept when more are added.
    func testInodeTagsAreOnePerFileSystemAndKept() throws {
        var numbers = InodeNumbers(main: 10)
        XCTAssertEqual(numbers.tag(10), 0)
        XCTAssertEqual(numbers.tag(99), 0, "alone, nothing is tagged")
        numbers.register(try LayerStack(substitution: Layer(path: patchRoot), main: Layer(path: mainRoot)))
        let shm = try makeTemporaryDirectory("shm", under: "/dev/shm")
        let tmpfs = try Layer(path: shm)
        try XCTSkipIf(tmpfs.device == (try Layer(path: mainRoot)).device, "/dev/shm is on the main bundle's file system")
        var two = InodeNumbers(main: 10)
        two.register(try LayerStack(substitution: Layer(path: patchRoot), patches: [tmpfs], main: Layer(path: mainRoot)))
        XCTAssertEqual(two.devices.count, 3)
        XCTAssertEqual(two.tag(two.devices[1]), 1 << 63)
        XCTAssertEqual(two.tag(two.devices[2]), 1 << 62)
        XCTAssertEqual(two.number(5, device: two.devices[2]), (1 << 62) | 5)
        let before = two.devices
        two.register(try LayerStack(substitution: Layer(path: patchRoot), main: Layer(path: mainRoot)))
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
