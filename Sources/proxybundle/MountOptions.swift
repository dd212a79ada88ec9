import Logging
import ProxyBundleCore
import ProxyBundleFUSE

/// The `-o` options of `mount`: the daemon's own, and the FUSE mount options passed on.
struct MountOptions {
    /// Every option as given, one word each, in order: what the daemon image is started with
    /// (see `daemonWords`). The fields below are only ever set from these words, so a mount
    /// flag changes the mount only by adding its word (`MountCommand.optionFlags`), and the
    /// daemon parses exactly what `mount` parsed.
    private(set) var words: [String] = []
    /// As given (lossless text, see `RawArguments`: a value may be a path that is not UTF-8).
    private(set) var fuse: [String] = []
    private(set) var timeouts = CacheTimeouts.standard
    private(set) var maxThreads: UInt32 = 16
    /// Microseconds a worker polls for the next request before it sleeps (0: never).
    private(set) var spin: UInt32 = 20
    private(set) var substitution: RawPath?
    /// `patches=DIR1:DIR2` (a `:` in a path written `\:`), highest priority first; a later
    /// `patches=` replaces an earlier one.
    private(set) var patches: [RawPath] = []
    /// `patches-from=FILE`: a file of patches, one a line, after those of `patches=` (for
    /// fstab, where an option string holds only a few); read by `mount`, not here.
    private(set) var patchesFrom: RawPath?
    /// `ro`: the daemon refuses every change with EROFS. The kernel mount itself stays
    /// read-write so that `.invalidate` can still be written.
    private(set) var readOnly = false
    /// `nosubstitution` (`--no-substitution`): no writable layer at all.
    private(set) var noSubstitution = false
    /// `acl`: the kernel enforces the layers' POSIX ACLs (see `Capabilities.acl`); by default
    /// (`noacl`) it checks the mode bits alone, which the daemon shows within each ACL
    /// (`FuseServer.shownWithinACL`); much faster for users who own nothing they open (the
    /// kernel asks for the ACL of each such file, again after each change of its attributes).
    private(set) var acl = false
    /// `casefold` (`--casefold`): names match ignoring case and Unicode normalization (see
    /// `CaseFold`), as ext4's and tmpfs's casefold directories match them.
    private(set) var casefold = false
    /// `watch`: invalidate by itself once changes in the layers settle.
    private(set) var watch = false
    /// `auto_unmount`: once the daemon has died without unmounting, its mount is taken away
    /// (see `AutoUnmount`; libfuse's own, through fusermount3, is not used).
    private(set) var autoUnmount = false
    /// `transport=auto|uring|device`: how requests travel (see `Transport`).
    private(set) var transport = Transport.auto
    /// `debug`: as libfuse file systems take it, the daemon stays in the foreground and logs
    /// at debug level to standard error (for fstab and the mount helper, which give no
    /// `--foreground` or `--log-level`).
    private(set) var debug = false
    /// `log_level=LEVEL`, as `--log-level` takes it.
    private(set) var logLevel: Logger.Level?
    /// `image=REF`: the image's layers as patches, after any others (see `MountImage`).
    private(set) var image: String?
    /// `store=DIR`: the store `image=` is found or pulled into.
    private(set) var store: String?

    /// FUSE and VFS options passed to libfuse as they are.
    static let passedFlags: Set<String> = [
        "allow_other", "default_permissions",
        "nodev", "nosuid", "noexec", "dev", "suid", "exec", "noatime", "atime", "nodiratime",
        "relatime", "sync", "async", "dirsync",
    ]
    static let passedValues: Set<String> = ["fsname"]
    /// Of `passedFlags`, those libfuse 3.14 refuses: the daemon sets them on its mount itself.
    static let setOnTheMount: Set<String> = ["relatime", "nodiratime"]
    /// What mount(8) and fstab lines may pass along that concerns only them; accepted and
    /// ignored (as are `x-*` and `comment=` options).
    static let mountCommandFlags: Set<String> = [
        "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev", "nofail",
    ]
    static let own = ["entry_timeout", "attr_timeout", "negative_timeout", "max_threads", "spin", "substitution", "patches",
                      "patches-from", "log_level", "debug", "image", "store",
                      "nocache", "ro", "nosubstitution", "acl", "noacl", "casefold", "nocasefold", "watch", "nowatch",
                      "transport", "auto_unmount"]

    /// What `-o` completes to in the shells: every option, `=` after those that take a value.
    static var completions: [String] {
        let valued: Set<String> = ["entry_timeout", "attr_timeout", "negative_timeout", "max_threads", "spin", "substitution",
                                   "patches", "patches-from", "log_level", "transport", "fsname", "image", "store"]
        return (own + passedFlags.sorted() + passedValues.sorted()).map { valued.contains($0) ? $0 + "=" : $0 }
    }

    static let help = """
        Comma-separated mount options. The daemon's own: entry_timeout=SECONDS, \
        attr_timeout=SECONDS, negative_timeout=SECONDS (default 86400; 0 turns that kernel cache \
        off), nocache (no caching at all, in the daemon or the kernel), ro (every change answers \
        EROFS; .invalidate still works), rw (the default), nosubstitution (as --no-substitution), acl (the kernel enforces the layers' \
        POSIX ACLs and new entries inherit default ACLs, as on kernel overlayfs; slower for users who \
        own nothing they open), noacl (the default: permissions by the mode bits, shown within each ACL so \
        that nobody gets what the layer refuses), casefold (as --casefold), nocasefold (the default), watch (changes made \
        in the layers show by themselves once they settle, as if .invalidate had been written), nowatch (the \
        default), auto_unmount (once the daemon has died without unmounting, its mount is taken away, unless \
        another was mounted over it), max_threads=N, spin=MICROSECONDS (how long a worker polls for the next \
        request before sleeping; default 20, 0 never polls), substitution=DIR, patches=DIR1:DIR2 (the patches, \
        highest priority first, after any --patch; a ':' in a path written '\\:'), patches-from=FILE (more \
        patches, one directory a line, after those; as --patches-from), image=REF (the layers of an image in \
        the store, top first, after those; pulled when the store lacks it, so a machine boots offline once it has \
        it), store=DIR (the store image= uses; default as for pull), transport=auto|uring|device (how \
        requests travel: FUSE over io_uring where the kernel offers it, the default; io_uring or refuse to mount; \
        /dev/fuse only), log_level=LEVEL (as --log-level), debug (as libfuse's: stay in the foreground and log \
        at debug level to stderr; for fstab and mount -t). Passed to FUSE: \(passedFlags.sorted().joined(separator: ", ")), fsname=NAME. \
        Accepted and ignored (for mount(8) and fstab): \(mountCommandFlags.sorted().joined(separator: ", ")), x-*, comment=.
        """

    init(_ lists: [String]) throws(Failure) {
        for list in lists {
            for option in list.split(separator: ",").map(String.init) {
                try apply(option)
                words.append(option)
            }
        }
    }

    private mutating func apply(_ option: String) throws(Failure) {
        let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let key = parts[0]
        let value = parts.count > 1 ? parts[1] : nil
        switch (key, value) {
        case ("entry_timeout", let v?): timeouts.entry = try MountOptions.seconds(key, v)
        case ("attr_timeout", let v?): timeouts.attribute = try MountOptions.seconds(key, v)
        case ("negative_timeout", let v?): timeouts.negative = try MountOptions.seconds(key, v)
        case ("max_threads", let v?):
            guard let n = UInt32(v), n >= 1, n <= 256 else { throw Failure("max_threads takes a whole number from 1 to 256, not '\(v)'") }
            maxThreads = n
        case ("spin", let v?):
            guard let n = UInt32(v), n <= 1000 else { throw Failure("spin takes a number of microseconds from 0 to 1000, not '\(v)'") }
            spin = n
        case ("substitution", let v?): substitution = RawPath(argument: v)
        case ("transport", let v?):
            guard let chosen = Transport(rawValue: v) else { throw Failure("transport takes auto, uring or device, not '\(v)'") }
            if chosen == .uring, let reason = Transport.unavailableReason { throw Failure("transport=uring: \(reason)") }
            transport = chosen
        case ("patches", let v?): patches = MountOptions.splitPatches(v).map(RawPath.init(argument:))
        case ("patches-from", let v?): patchesFrom = RawPath(argument: v)
        case ("image", let v?): image = v
        case ("store", let v?): store = v
        case ("debug", nil):
            debug = true
            logLevel = .debug
        case ("log_level", let v?):
            guard let level = Logger.Level(rawValue: v) else {
                throw Failure("log_level takes \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), not '\(v)'")
            }
            logLevel = level
        case ("nocache", nil): timeouts = .none
        case ("ro", nil): readOnly = true
        case ("nosubstitution", nil): noSubstitution = true
        case ("rw", nil): readOnly = false
        case ("acl", nil): acl = true
        case ("noacl", nil): acl = false
        case ("casefold", nil): casefold = true
        case ("nocasefold", nil): casefold = false
        case ("watch", nil): watch = true
        case ("nowatch", nil): watch = false
        case ("auto_unmount", nil): autoUnmount = true
        case (_, nil) where MountOptions.mountCommandFlags.contains(key): break
        case _ where key.hasPrefix("x-") || key == "comment": break
        case (_, nil) where MountOptions.passedFlags.contains(key): fuse.append(key)
        case (_, _?) where MountOptions.passedValues.contains(key): fuse.append(option)
        case (_, nil) where MountOptions.own.contains(key) || MountOptions.passedValues.contains(key):
            throw Failure("mount option '\(key)' needs a value (\(key)=...)")
        default:
            throw Failure("unknown mount option '\(RawPath(argument: option))' (see proxybundle mount --help)")
        }
    }

    /// Options `mount` turns into the layers of the plan (its substitution and patches)
    /// before the daemon starts: the daemon image gets the layers themselves, not these.
    static let resolvedByMount: Set<String> = ["substitution", "patches", "patches-from", "image", "store"]

    /// The words the daemon image parses again: all but those `mount` resolved into layers.
    var daemonWords: [String] {
        words.filter { word in
            !MountOptions.resolvedByMount.contains(String(word.prefix { $0 != "=" }))
        }
    }

    /// The FUSE mount's access-time options, which the substitution is reached with too (as
    /// kernel overlayfs reaches its upper layer; a later `atime` undoes `noatime`).
    var accessTimes: Layer.AccessTimes {
        var result: Layer.AccessTimes = []
        for option in fuse {
            switch option {
            case "noatime": result.insert(.noatime)
            case "atime": result.remove(.noatime)
            case "nodiratime": result.insert(.nodiratime)
            default: break
            }
        }
        return result
    }

    static func seconds(_ key: String, _ value: String) throws(Failure) -> Double {
        guard let number = Double(value), number >= 0, number.isFinite else {
            throw Failure("\(key) takes a number of seconds, not '\(value)'")
        }
        return number
    }

    /// A directory as written in a `patches=` value.
    static func escapedPatch(_ path: String) -> String {
        var result = ""
        for character in path {
            if character == "\\" || character == ":" { result.append("\\") }
            result.append(character)
        }
        return result
    }

    /// The directories of a `patches=` value: separated by `:`, where `\:` is a colon and
    /// `\\` a backslash within a path.
    static func splitPatches(_ value: String) -> [String] {
        var result: [String] = []
        var current = ""
        var escaped = false
        for character in value {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" {
                result.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if escaped { current.append("\\") }
        result.append(current)
        return result.filter { !$0.isEmpty }
    }
}
