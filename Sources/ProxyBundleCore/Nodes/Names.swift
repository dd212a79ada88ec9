#if canImport(Glibc)
import Glibc
#endif

/// Rules for names that come through the mount.
enum Names {
    static let maximumLength = 255

    /// Names the kernel may ask for but the overlay never shows.
    static func checkLookup(_ name: [UInt8]) throws(Errno) {
        if name.count > maximumLength { throw Errno.nameTooLong }
        if name.isEmpty || name == [0x2E] || name == [0x2E, 0x2E] { throw Errno.invalid }
        // one name, never a path: a "/" would let the lookup walk through a symlink
        if name.contains(UInt8(ascii: "/")) || name.contains(0) { throw Errno.invalid }
        if Whiteout.hasPrefix(name) { throw Errno.noEntry }
    }
}

extension Names {
    /// Names that may be created through the mount: never a `.wh.` name (those are how the
    /// substitution records deletions), never longer than 255 bytes.
    static func checkNew(_ name: [UInt8]) throws(Errno) {
        if name.count > maximumLength { throw Errno.nameTooLong }
        if name.isEmpty || name.contains(UInt8(ascii: "/")) || name.contains(0) { throw Errno.invalid }
        if name == [0x2E] || name == [0x2E, 0x2E] { throw Errno(EEXIST) }
        if Whiteout.hasPrefix(name) { throw Errno.notPermitted }
    }
}
