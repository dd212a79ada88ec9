@testable import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The request as a value passed to every operation: the view it reads, its caller, whether
/// its caller gave up, and what its changes leave for the kernel to forget.
final class RequestTests: OverlayTestCase {
    /// A request reads the layers current when it was made to its end, though the patches are
    /// swapped meanwhile; a request made after the swap reads the new ones.
    func testARequestReadsTheViewItWasMadeIn() throws {
        let second = try makeTemporaryDirectory("second")
        try write(.outside, "f", "first")
        XCTAssertTrue(FileManager.default.createFile(atPath: second + "/f", contents: Data("second patch".utf8)))
        let overlay = try Overlay(main: Layer(path: mainRoot), patches: [Layer(path: outsideRoot)],
                                  substitution: Layer(path: patchRoot), writable: true)
        let before = Request(overlay)
        _ = try overlay.replacePatches([try Layer(path: second)])
        let after = Request(overlay)
        XCTAssertEqual(before.layers.patches.map(\.path), [RawPath(outsideRoot)])
        XCTAssertEqual(after.layers.patches.map(\.path), [RawPath(second)])
        let old = try overlay.lookup(before, parent: rootNodeID, name: n("f"))
        XCTAssertEqual(old.attributes.st_size, 5, "the view the request was made in")
        XCTAssertEqual(try overlay.attributes(before, of: old.node).st_size, 5)
        let new = try overlay.lookup(after, parent: rootNodeID, name: n("f"))
        XCTAssertEqual(new.attributes.st_size, 12, "the view after the swap")
    }

    /// A long copy stops with EINTR, leaving nothing, once the caller gave up, but only while
    /// the request says it may (as the FUSE server does for the operations that may take long).
    func testACopyUpStopsOnlyWhileTheRequestIsInterruptible() throws {
        try write(.main, "big", "data")
        let overlay = try makeCachingOverlay()
        let file = try lookup(overlay, "big").node
        let request = Request(overlay, origin: GaveUp())
        assertErrno(EINTR, try request.whileInterruptible { () throws(Errno) -> Overlay.OpenedFile in
            try overlay.openFile(request, file, flags: O_WRONLY)
        })
        XCTAssertFalse(FileManager.default.fileExists(atPath: path(.patch, "big")), "nothing copied")
        let opened = try overlay.openFile(request, file, flags: O_WRONLY)
        overlay.release(file, fd: opened.fd)
        XCTAssertEqual(try String(contentsOfFile: path(.patch, "big"), encoding: .utf8), "data")
    }

    /// The caller's groups come from the request's origin, read once and only when a check
    /// needs them; a request without one has its owner's.
    func testTheCallersGroupsAreReadFromTheOriginWhenNeeded() throws {
        let overlay = try makeCachingOverlay()
        let origin = GaveUp()
        let request = Request(overlay, owner: Requester(uid: 1000, gid: 1000, groups: [], umask: 0o022), origin: origin)
        XCTAssertEqual(origin.reads.count, 0)
        XCTAssertEqual(request.caller.groups, [4, 24])
        XCTAssertEqual(request.caller.groups, [4, 24])
        XCTAssertEqual(origin.reads.count, 1)
        XCTAssertEqual(request.caller.umask, 0o022)
        XCTAssertEqual(Request(overlay, owner: Requester(uid: 1, gid: 1, groups: [7])).caller.groups, [7])
    }

    /// Where names fold, a name made ends what was remembered missing in its other spellings:
    /// the request that made it keeps those for the kernel (told before its reply), once.
    func testAChangeLeavesWhatTheKernelMustForgetInItsRequest() throws {
        let overlay = try Overlay(main: Layer(path: mainRoot, foldsNames: true),
                                  substitution: Layer(path: patchRoot, foldsNames: true), writable: true)
        let lookup = Request(overlay)
        guard case .absent(remembered: true) = try overlay.find(lookup, n("readme"), in: rootNodeID) else {
            return XCTFail("the missing name is remembered")
        }
        XCTAssertNil(lookup.takeKernelForgets())
        let create = Request(overlay, owner: me)
        let made = try overlay.create(create, .file(mode: 0o644, flags: O_WRONLY), named: n("README"), in: rootNodeID)
        if let fd = made.fd { overlay.release(made.entry.node, fd: fd) }
        let forgets = try XCTUnwrap(create.takeKernelForgets())
        XCTAssertTrue(forgets.names.contains { $0.parent == rootNodeID && $0.name == n("readme") }, "\(forgets.names)")
        XCTAssertNil(create.takeKernelForgets(), "taken once")
    }
}

/// A caller that gave up waiting, in groups 4 and 24.
private final class GaveUp: RequestOrigin {
    var reads: [Int] = []
    func groups() -> [gid_t] {
        reads.append(1)
        return [4, 24]
    }
    var isInterrupted: Bool { true }
}
