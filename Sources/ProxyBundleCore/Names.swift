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
