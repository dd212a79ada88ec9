import Dispatch
import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// LayerPath, Whiteout names, Errno and Locked.
final class ValueTypeTests: XCTestCase {
    func testLayerPathNormalisesSlashes() {
        XCTAssertEqual(LayerPath("a//b/c/").bytes, n("a/b/c"))
        XCTAssertEqual(LayerPath("/a").bytes, n("a"))
        XCTAssertTrue(LayerPath("").isRoot)
        XCTAssertTrue(LayerPath("/").isRoot)
        XCTAssertEqual(LayerPath.root.description, ".")
        XCTAssertEqual(LayerPath("a/b").description, "a/b")
    }

    func testLayerPathAppending() {
        XCTAssertEqual(LayerPath.root.appending(n("x")), LayerPath("x"))
        XCTAssertEqual(LayerPath("a/b").appending(n("c")).bytes, n("a/b/c"))
        XCTAssertTrue(LayerPath("x").isSingleName)
        XCTAssertFalse(LayerPath("x/y").isSingleName)
        XCTAssertFalse(LayerPath.root.isSingleName)
    }

    func testLayerPathCString() {
        XCTAssertEqual(LayerPath.root.withCString { String(cString: $0) }, ".")
        XCTAssertEqual(LayerPath("a/b").withCString { String(cString: $0) }, "a/b")
        XCTAssertEqual([UInt8]().withCStringCopy { strlen($0) }, 0)
    }

    func testWhiteoutNames() {
        XCTAssertEqual(Whiteout.fileName(hiding: n("x")), n(".wh.x"))
        XCTAssertEqual(Whiteout.hiddenName(n(".wh.x")), n("x"))
        XCTAssertEqual(Whiteout.hiddenName(n(".wh..hidden")), n(".hidden"))
        XCTAssertNil(Whiteout.hiddenName(n(".wh..wh..opq")))
        XCTAssertNil(Whiteout.hiddenName(n(".wh..wh.work")))
        XCTAssertNil(Whiteout.hiddenName(n("x")))
        XCTAssertTrue(Whiteout.hasPrefix(n(".wh.")))
        XCTAssertFalse(Whiteout.hasPrefix(n(".wh")))
        XCTAssertFalse(Whiteout.hasPrefix(n("a.wh.b")))
    }

    func testWhiteoutDeviceRecognition() {
        var st = stat()
        st.st_mode = S_IFCHR | 0o600
        st.st_rdev = 0
        XCTAssertTrue(Whiteout.isDevice(st))
        st.st_rdev = 259
        XCTAssertFalse(Whiteout.isDevice(st))
        st.st_mode = S_IFBLK | 0o600
        st.st_rdev = 0
        XCTAssertFalse(Whiteout.isDevice(st))
        st.st_mode = S_IFREG | 0o600
        XCTAssertFalse(Whiteout.isDevice(st))
    }

    func testErrnoIsNeverZero() {
        XCTAssertEqual(Errno(0).code, EIO)
        XCTAssertEqual(Errno(ENOENT), Errno.noEntry)
        XCTAssertEqual(Errno.readOnly.code, EROFS)
        XCTAssertEqual(Errno.stale.code, ESTALE)
        XCTAssertEqual(Errno(ENOENT).description, "No such file or directory")
    }

    func testLockedSerialisesUpdates() {
        let counter = Locked(0, rank: .local)
        DispatchQueue.concurrentPerform(iterations: 1000) { _ in counter.withLock { $0 += 1 } }
        XCTAssertEqual(counter.withLock { $0 }, 1000)
    }
}

final class LayerPathPiecesTests: XCTestCase {
    /// A path too long for one system call is cut at slashes into pieces that each fit, and
    /// that together are the path.
    func testLongPathsAreCutIntoPiecesShorterThanTheLimit() {
        let name = [UInt8](repeating: 0x61, count: 200)
        var path = LayerPath.root
        for _ in 0..<50 { path = path.appending(name) }
        let pieces = path.pieces(shorterThan: 4096)
        XCTAssertEqual(pieces.count, 3)
        XCTAssertTrue(pieces.allSatisfy { $0.bytes.count < 4096 && !$0.bytes.isEmpty })
        XCTAssertEqual(Array(pieces.map(\.bytes).joined(separator: [UInt8(ascii: "/")])), path.bytes)
        XCTAssertEqual(LayerPath("a/b").pieces(shorterThan: 4096), [LayerPath("a/b")])
    }
}
