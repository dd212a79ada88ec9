#if canImport(Glibc)
import Glibc
#endif
import CSyscalls

/// The conventions by which the substitution directory records deletions.
///
/// OCI image layers: `.wh.NAME` hides NAME of the main bundle in the same directory, and
/// `.wh..wh..opq` hides all of the main bundle's entries of its directory. Also read are
/// overlayfs' forms: a 0/0 character device named NAME, and an `overlay.opaque` xattr equal
/// to "y" on a directory. Names beginning with `.wh.` are never shown through the mount.
public enum Whiteout {
    public static let prefix: [UInt8] = Array(".wh.".utf8)
    /// Names the overlay keeps for itself (the opaque marker, the copy-up work directory).
    public static let reservedPrefix: [UInt8] = Array(".wh..wh.".utf8)
    public static let opaqueMarker: [UInt8] = Array(".wh..wh..opq".utf8)
    public static let opaqueAttributes = ["trusted.overlay.opaque", "user.overlay.opaque"]
    /// Extended attribute prefixes that belong to overlay implementations and are not shown.
    public static let privateAttributePrefixes: [[UInt8]] = [
        Array("trusted.overlay.".utf8), Array("user.overlay.".utf8),
    ]

    /// Whether `st` is overlayfs' whiteout: a character device numbered 0/0.
    public static func isDevice(_ st: stat) -> Bool {
        (st.st_mode & S_IFMT) == S_IFCHR && st.st_rdev == 0
    }

    public static func hasPrefix(_ name: [UInt8]) -> Bool {
        name.starts(with: prefix)
    }

    static func hasPrefix(_ name: UnsafeRawBufferPointer) -> Bool {
        name.starts(with: prefix)
    }

    /// For an entry named `.wh.NAME` (not a reserved name), NAME, in the entry's own bytes.
    static func hiddenName(_ entry: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard hasPrefix(entry), !entry.starts(with: reservedPrefix) else { return nil }
        return UnsafeRawBufferPointer(rebasing: entry[prefix.count...])
    }

    /// For an entry named `.wh.NAME` (not a reserved name), NAME.
    public static func hiddenName(_ entry: [UInt8]) -> [UInt8]? {
        guard hasPrefix(entry), !entry.starts(with: reservedPrefix) else { return nil }
        return Array(entry[prefix.count...])
    }

    /// The whiteout file's name for NAME.
    public static func fileName(hiding name: [UInt8]) -> [UInt8] {
        prefix + name
    }

    /// Whether the directory `dirfd` of the substitution holds a whiteout file for `name`.
    static func fileExists(hiding name: [UInt8], in dirfd: Int32) throws(Errno) -> Bool {
        try exists(fileName(hiding: name), in: dirfd)
    }

    /// Writes the whiteout file hiding `name` in the substitution directory `dirfd`.
    static func write(hiding name: [UInt8], in dirfd: Int32) throws(Errno) {
        try fileName(hiding: name).withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            let fd = try Sys.check { openat(dirfd, p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644) }
            Sys.close(fd)
        }
    }

    /// Whether a whiteout for `name` must take overlayfs' form, a 0/0 character device named
    /// `name` itself: `.wh.NAME` would be longer than a name can be (more than 251 bytes).
    /// Kernel overlayfs takes names of up to 255 bytes, and removes such names from a lower
    /// layer with its device; proxybundle does the same rather than refuse (or report a limit
    /// of 251 and hide what the layers below hold), at the cost that such a whiteout is not an
    /// OCI one (no OCI whiteout can hide such a name).
    static func needsDevice(_ name: [UInt8]) -> Bool {
        name.count + prefix.count > Names.maximumLength
    }

    /// Whether the entry `name` of `dirfd` is a whiteout device: one proxybundle wrote (for a
    /// name too long for `.wh.`), or one in overlayfs' form that kernel overlayfs or an updater
    /// left. An entry made with that name takes the device's place.
    static func deviceExists(_ name: [UInt8], in dirfd: Int32) throws(Errno) -> Bool {
        do {
            let st = try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(dirfd, p) }
            return isDevice(st)
        } catch let error where error.code == ENOENT {
            return false
        }
    }

    /// Makes a whiteout device `name` in `dirfd`, where no entry has that name.
    static func writeDevice(_ name: [UInt8], in dirfd: Int32) throws(Errno) {
        try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            _ = try Sys.check { mknodat(dirfd, p, S_IFCHR, 0) }
        }
    }

    /// Removes the whiteout file hiding `name` in `dirfd`, if there is one.
    static func remove(hiding name: [UInt8], in dirfd: Int32) throws(Errno) {
        try fileName(hiding: name).withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) in
            if unlinkat(dirfd, p, 0) != 0 && errno != ENOENT { throw Errno.current }
        }
    }

    /// Whether the substitution directory `dirfd` hides the main bundle's entries below it.
    /// `name` and `parent`, when given, name the same directory: its attributes are then read
    /// beside it (`getxattrat`), walking no path through /proc.
    static func isOpaque(_ dirfd: Int32, named name: UnsafePointer<CChar>? = nil, in parent: Int32 = -1) throws(Errno) -> Bool {
        if try exists(opaqueMarker, in: dirfd) { return true }
        for attribute in opaqueAttributes {
            let value: [UInt8]
            do {
                if let name, parent >= 0, Sys.hasAttributeCallsAt {
                    value = try Sys.getxattr(in: parent, name, attribute: attribute)
                } else {
                    value = try Sys.getxattr(fd: dirfd, name: attribute)
                }
            } catch let error where [ENODATA, ENOTSUP, EPERM].contains(error.code) {
                continue
            }
            if value == [UInt8(ascii: "y")] { return true }
        }
        return false
    }

    /// Whether the directory `name` of `parent` hides the layers below it, asked beside it
    /// without opening it: its marker looked for through its name (resolved beneath `parent`,
    /// no symlink followed), its attributes listed once (`listxattrat`) and read only where
    /// one of the opaque attributes is there. Two system calls for a plain directory, as a
    /// lookup through hundreds of layers makes one such check in each. Before Linux 6.13, the
    /// directory is opened for `isOpaque(_:named:in:)`.
    static func isOpaque(named name: UnsafePointer<CChar>, in parent: Int32) throws(Errno) -> Bool {
        guard Sys.hasAttributeCallsAt else {
            let child = try Sys.check { openat(parent, name, pb_O_PATH | pb_O_DIRECTORY | pb_O_NOFOLLOW | pb_O_CLOEXEC) }
            defer { Sys.close(child) }
            return try isOpaque(child, named: name, in: parent)
        }
        let marker = Array(UnsafeRawBufferPointer(start: name, count: strlen(name))) + [UInt8(ascii: "/")] + opaqueMarker
        do {
            let fd = try marker.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> Int32 in
                try Sys.openat2(parent, p, flags: pb_O_PATH | pb_O_NOFOLLOW | pb_O_CLOEXEC, resolve: Layer.resolve)
            }
            Sys.close(fd)
            return true
        } catch let error where error.code == ENOENT || error.code == ENAMETOOLONG {
            // no marker (a name of more than 241 bytes leaves no room for one in a path)
        }
        let listed: [UInt8]
        do {
            listed = try Sys.listxattr(in: parent, name)
        } catch let error where [ENOTSUP, EPERM].contains(error.code) {
            return false
        }
        let names = listed.split(separator: 0)
        for attribute in opaqueAttributes where names.contains(where: { $0.elementsEqual(attribute.utf8) }) {
            let value: [UInt8]
            do {
                value = try Sys.getxattr(in: parent, name, attribute: attribute)
            } catch let error where [ENODATA, ENOTSUP, EPERM].contains(error.code) {
                continue
            }
            if value == [UInt8(ascii: "y")] { return true }
        }
        return false
    }

    private static func exists(_ name: [UInt8], in dirfd: Int32) throws(Errno) -> Bool {
        do {
            _ = try name.withCStringCopy { (p: UnsafePointer<CChar>) throws(Errno) -> stat in try Sys.lstatat(dirfd, p) }
            return true
        } catch let error where error.code == ENOENT || error.code == ENAMETOOLONG {
            // a whiteout for a name of more than 251 bytes cannot exist
            return false
        }
    }
}
