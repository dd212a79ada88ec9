import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Helpers of the cache and invalidation tests.
extension OverlayTestCase {
    /// A writable, caching overlay that reopens the substitution when its path is swapped.
    func makeCachingOverlay() throws -> Overlay {
        try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: patchRoot), writable: true,
                    substitutionPath: RawPath(patchRoot), cachesLookups: true)
    }

    var me: Requester { Requester(uid: getuid(), gid: getgid(), groups: []) }

    /// Replaces a file on disk by renaming a new one over it (so it gets a new inode).
    func replaceOnDisk(_ side: Side, _ relative: String, _ content: String) throws {
        let before = try lstatOf(side, relative).st_ino
        try write(side, relative + ".replacement", content)
        try rename(side, relative + ".replacement", relative)
        XCTAssertNotEqual(try lstatOf(side, relative).st_ino, before, "fixture: the replacement must be another inode")
    }

    func touched(_ result: Overlay.Invalidation, _ parent: NodeID, _ name: String) -> Bool {
        result.entries.contains { $0.parent == parent && $0.name == n(name) }
    }
}
