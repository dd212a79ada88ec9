import CSyscalls
import Foundation
import ProxyBundleCore
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A failure while preparing a test tree (not an assertion about the overlay).
struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ what: String, errno code: Int32 = errno) {
        description = "\(what): \(String(cString: strerror(code)))"
    }
}

/// Which directory tree a fixture helper works in.
enum Side {
    /// The main bundle (lower layer).
    case main
    /// The substitution directory (upper layer).
    case patch
    /// A directory outside both layers, for containment tests.
    case outside
}

/// Base class: every test gets a fresh main bundle, substitution directory and "outside"
/// directory under /tmp, removed again in tearDown.
class OverlayTestCase: XCTestCase {
    var mainRoot = ""
    var patchRoot = ""
    var outsideRoot = ""
    private var temporaryDirectories: [String] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        mainRoot = try makeTemporaryDirectory("main")
        patchRoot = try makeTemporaryDirectory("patch")
        outsideRoot = try makeTemporaryDirectory("outside")
    }

    override func tearDownWithError() throws {
        for dir in temporaryDirectories.reversed() {
            try? FileManager.default.removeItem(atPath: dir)
        }
        temporaryDirectories = []
        try super.tearDownWithError()
    }

    /// A new empty directory under `base`, removed in tearDown.
    func makeTemporaryDirectory(_ label: String, under base: String = "/tmp") throws -> String {
        var template = Array("\(base)/pbcore-\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
        guard let made else { throw FixtureError("mkdtemp in \(base)") }
        let path = String(cString: made)
        temporaryDirectories.append(path)
        return path
    }

    // MARK: building trees

    func root(_ side: Side) -> String {
        switch side {
        case .main: return mainRoot
        case .patch: return patchRoot
        case .outside: return outsideRoot
        }
    }

    func path(_ side: Side, _ relative: String) -> String {
        relative.isEmpty ? root(side) : root(side) + "/" + relative
    }

    private func makeParent(_ side: Side, _ relative: String) throws {
        let parent = (path(side, relative) as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
    }

    /// Writes a regular file (creating missing parent directories).
    func write(_ side: Side, _ relative: String, _ content: String = "", mode: mode_t = 0o644) throws {
        try makeParent(side, relative)
        let fd = open(path(side, relative), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode)
        guard fd >= 0 else { throw FixtureError("create \(relative)") }
        defer { close(fd) }
        let bytes = Array(content.utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw FixtureError("write \(relative)") }
            written += n
        }
        guard fchmod(fd, mode) == 0 else { throw FixtureError("chmod \(relative)") }
    }

    /// Creates a directory (and missing parents).
    func mkdir(_ side: Side, _ relative: String, mode: mode_t = 0o755) throws {
        try FileManager.default.createDirectory(atPath: path(side, relative), withIntermediateDirectories: true)
        guard chmod(path(side, relative), mode) == 0 else { throw FixtureError("chmod \(relative)") }
    }

    func symlink(_ side: Side, _ relative: String, to target: String) throws {
        try makeParent(side, relative)
        guard Glibc.symlink(target, path(side, relative)) == 0 else { throw FixtureError("symlink \(relative)") }
    }

    func hardLink(_ side: Side, _ existing: String, _ new: String) throws {
        try makeParent(side, new)
        guard link(path(side, existing), path(side, new)) == 0 else { throw FixtureError("link \(new)") }
    }

    /// overlayfs' whiteout: a character device 0/0.
    func whiteoutDevice(_ side: Side, _ relative: String) throws {
        try makeCharacterDevice(side, relative, major: 0, minor: 0)
    }

    func makeCharacterDevice(_ side: Side, _ relative: String, major: UInt32, minor: UInt32) throws {
        try makeParent(side, relative)
        guard mknod(path(side, relative), S_IFCHR | 0o600, deviceNumber(major, minor)) == 0 else {
            throw FixtureError("mknod \(relative)")
        }
    }

    /// glibc's makedev (a macro Swift cannot see).
    func deviceNumber(_ major: UInt32, _ minor: UInt32) -> dev_t {
        let ma = UInt64(major), mi = UInt64(minor)
        return dev_t(((ma & 0xfffff000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffffff00) << 12) | (mi & 0xff))
    }

    /// Sets an extended attribute on the entry itself (not following a symlink).
    func setAttribute(_ side: Side, _ relative: String, _ name: String, _ value: String) throws {
        let bytes = Array(value.utf8)
        let result = bytes.withUnsafeBytes { lsetxattr(path(side, relative), name, $0.baseAddress, $0.count, 0) }
        guard result == 0 else { throw FixtureError("setxattr \(name) on \(relative)") }
    }

    func remove(_ side: Side, _ relative: String) throws {
        try FileManager.default.removeItem(atPath: path(side, relative))
    }

    func rename(_ side: Side, _ from: String, _ to: String) throws {
        guard Glibc.rename(path(side, from), path(side, to)) == 0 else { throw FixtureError("rename \(from)") }
    }

    func setOwner(_ side: Side, _ relative: String, uid: uid_t, gid: gid_t) throws {
        guard lchown(path(side, relative), uid, gid) == 0 else { throw FixtureError("chown \(relative)") }
    }

    func setModificationTime(_ side: Side, _ relative: String, seconds: Int, nanoseconds: Int) throws {
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        guard utimensat(AT_FDCWD, path(side, relative), &times, pb_AT_SYMLINK_NOFOLLOW) == 0 else {
            throw FixtureError("utimensat \(relative)")
        }
    }

    /// lstat of an entry of a tree.
    func lstatOf(_ side: Side, _ relative: String) throws -> stat {
        var st = stat()
        guard lstat(path(side, relative), &st) == 0 else { throw FixtureError("lstat \(relative)") }
        return st
    }

    // MARK: the overlay

    func makeOverlay() throws -> Overlay {
        try Overlay(main: Layer(path: mainRoot), substitution: Layer(path: patchRoot))
    }

    /// Looks up every component of `relative` from the root, as the kernel would.
    /// `relative` must name at least one component.
    @discardableResult
    func lookup(_ overlay: Overlay, _ relative: String) throws -> Overlay.Entry {
        var parent = rootNodeID
        var entry: Overlay.Entry? = nil
        for component in relative.split(separator: "/") {
            entry = try overlay.lookup(Request(overlay), parent: parent, name: Array(component.utf8))
            parent = entry!.node
        }
        guard let entry else { throw FixtureError("lookup of an empty path", errno: EINVAL) }
        return entry
    }

    /// The names of a listing, in order, "." and ".." included; the root's control files
    /// (tested in ControlFileTests) left out.
    func names(_ listing: DirectoryListing) -> [String] {
        listing.named.filter { ControlFile(name: $0.name, in: listing.node) == nil }
            .map { String(decoding: $0.name, as: UTF8.self) }
    }

    /// The listing's names without "." and "..", sorted.
    func entryNames(_ listing: DirectoryListing) -> [String] {
        names(listing).filter { $0 != "." && $0 != ".." }.sorted()
    }

    func item(_ listing: DirectoryListing, _ name: String) -> DirectoryListing.Item? {
        listing.named.first { $0.name == Array(name.utf8) }?.item
    }

    /// Opens `node` read-only through the overlay and reads the whole file.
    func readContent(_ overlay: Overlay, _ node: NodeID) throws -> String {
        let fd = try overlay.openFile(Request(overlay), node, flags: O_RDONLY).fd
        defer { close(fd) }
        return try readAll(fd)
    }

    func readAll(_ fd: Int32) throws -> String {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { throw FixtureError("read") }
            if n == 0 { break }
            data.append(contentsOf: chunk[..<n])
        }
        return String(decoding: data, as: UTF8.self)
    }

    func fileType(_ st: stat) -> mode_t { st.st_mode & S_IFMT }
}

/// Asserts that `expression` throws exactly the errno `expected`.
func assertErrno<T>(_ expected: Int32, _ expression: @autoclosure () throws -> T, _ message: String = "",
                    file: StaticString = #filePath, line: UInt = #line) {
    do {
        let value = try expression()
        XCTFail("expected \(Errno(expected)) (\(expected)), got a result: \(value) \(message)", file: file, line: line)
    } catch let error as Errno {
        XCTAssertEqual(error.code, expected, "expected \(Errno(expected)) (\(expected)), got \(error) (\(error.code)) \(message)",
                       file: file, line: line)
    } catch {
        XCTFail("expected \(Errno(expected)), got a non-Errno error \(error) \(message)", file: file, line: line)
    }
}

/// The name bytes of a String.
func n(_ text: String) -> [UInt8] { Array(text.utf8) }
