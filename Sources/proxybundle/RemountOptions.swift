import ProxyBundleCore
import ProxyBundleFUSE

/// The `-o` options of a remount, checked against the running mount: what may change (`ro`,
/// `rw`, the cache timeouts, `nosuid`/`nodev`/`noexec` and their opposites), and what may only
/// say what the mount already has (mount(8) passes the mount's present options along with the
/// new ones, and an fstab line's too): anything else that differs is refused by name.
struct RemountOptions {
    var readOnly: Bool?
    var entry: Double?
    var attribute: Double?
    var negative: Double?
    /// MOUNT_ATTR_ flags to set and to clear on the mount.
    var setFlags: UInt64 = 0
    var clearFlags: UInt64 = 0

    static let readOnlyFlag: UInt64 = 0x1
    static let vfsFlags: [String: (flag: UInt64, set: Bool)] = [
        "nosuid": (0x2, true), "suid": (0x2, false), "nodev": (0x4, true), "dev": (0x4, false),
        "noexec": (0x8, true), "exec": (0x8, false),
    ]

    /// What the mount has now, to compare the fixed options with.
    struct Present {
        var mount: RunningMount
        var table: MountTable.Mount
        /// The `-o` options the daemon was started with (nil when they cannot be read).
        var started: MountOptions?

        var kernelReadOnly: Bool { table.options.contains("ro") }
    }

    /// The daemon's text for `.remount`: only what changes in it.
    var daemonText: String {
        var parts: [String] = []
        if let readOnly { parts.append(readOnly ? "ro" : "rw") }
        if let entry { parts.append("entry_timeout=\(entry.secondsText)") }
        if let attribute { parts.append("attr_timeout=\(attribute.secondsText)") }
        if let negative { parts.append("negative_timeout=\(negative.secondsText)") }
        return parts.joined(separator: ",")
    }

    /// `helper`: the options come from mount(8), which puts the mount's own `rw` or `ro`
    /// first; only a change of the kernel's flag counts then (a mount made with `-o ro`, whose
    /// kernel flag stays writable, is not made writable by a remount that only passes that on).
    init(_ lists: [String], present: Present, helper: Bool) throws(Failure) {
        for list in lists {
            for option in list.split(separator: ",").map(String.init) {
                try apply(option, present)
            }
        }
        if helper && readOnly == false && !present.kernelReadOnly { readOnly = nil }
        if readOnly == true { setFlags |= RemountOptions.readOnlyFlag }
        if readOnly == false { clearFlags |= RemountOptions.readOnlyFlag }
    }

    private mutating func apply(_ option: String, _ present: Present) throws(Failure) {
        let parts = option.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let key = parts[0]
        let value = parts.count > 1 ? parts[1] : nil
        switch (key, value) {
        case ("remount", nil), ("default_permissions", nil): break
        case ("ro", nil): readOnly = true
        case ("rw", nil): readOnly = false
        case ("entry_timeout", let v?): entry = try MountOptions.seconds(key, v)
        case ("attr_timeout", let v?): attribute = try MountOptions.seconds(key, v)
        case ("negative_timeout", let v?): negative = try MountOptions.seconds(key, v)
        case (_, nil) where RemountOptions.vfsFlags[key] != nil:
            guard let (flag, set) = RemountOptions.vfsFlags[key] else { break }
            if set { setFlags |= flag; clearFlags &= ~flag } else { clearFlags |= flag; setFlags &= ~flag }
        case (_, nil) where MountOptions.mountCommandFlags.contains(key): break
        case _ where key.hasPrefix("x-") || key == "comment": break
        default:
            guard let has = RemountOptions.present(option, key: key, value: value, present) else {
                throw Failure("unknown mount option '\(option)' (see proxybundle remount --help)")
            }
            if !has {
                let how = key == "patches" ? "change the patches with: proxybundle layers \(present.mount.mountpoint) --set DIR..."
                    : "unmount and mount again to change it"
                throw Failure("mount option '\(option)' cannot change on a live mount; \(how)")
            }
        }
    }

    /// Whether the mount has `option` already; nil for an option no mount takes.
    private static func present(_ option: String, key: String, value: String?, _ present: Present) -> Bool? {
        let started = present.started
        let fuse = started?.fuse ?? []
        let atime = present.table.options
        switch (key, value) {
        case ("user_id", _?), ("group_id", _?): return present.table.superOptions.contains(option)
        case ("allow_other", nil): return present.table.superOptions.contains(key)
        case ("auto_unmount", nil): return started?.autoUnmount ?? false
        case ("sync", nil), ("dirsync", nil): return fuse.contains(key)
        case ("async", nil): return !fuse.contains("sync")
        case ("noatime", nil), ("relatime", nil), ("nodiratime", nil): return atime.contains(key)
        case ("atime", nil), ("strictatime", nil): return !atime.contains("noatime") && !atime.contains("relatime")
        case ("diratime", nil): return !atime.contains("nodiratime")
        case ("fsname", let v?): return RawPath(argument: v) == present.table.source
        case ("substitution", let v?): return present.mount.substitution == Paths.absolute(RawPath(argument: v))
        case ("patches", let v?):
            return MountOptions.splitPatches(v).map { Paths.absolute(RawPath(argument: $0)) } == present.mount.patches
        case ("transport", let v?): return v == "auto" || v == present.mount.stat("transport")
        case ("watch", nil), ("nowatch", nil): return present.mount.stat("watch") == (key == "watch" ? "on" : "off")
        case ("acl", nil), ("noacl", nil): return started.map { $0.acl == (key == "acl") } ?? false
        case ("casefold", nil), ("nocasefold", nil): return present.mount.foldsNames == (key == "casefold")
        case ("nocache", nil): return started.map { $0.timeouts == .none } ?? false
        case ("max_threads", let v?): return started.map { String($0.maxThreads) == v } ?? false
        case ("spin", let v?): return started.map { String($0.spin) == v } ?? false
        case ("debug", nil): return started.map { $0.debug } ?? false
        case ("log_level", let v?): return started.map { $0.logLevel?.rawValue == v } ?? false
        default: return nil
        }
    }
}
