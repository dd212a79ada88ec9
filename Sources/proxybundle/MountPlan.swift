import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// The checked arguments of one mount: absolute paths and parsed options.
struct MountPlan {
    var main: String
    var mountpoint: String
    var substitution: String
    var options: MountOptions

    /// `-o ro`: every change answers EROFS.
    var readOnly: Bool { options.readOnly }

    init(main mainArgument: String, mountpoint mountArgument: String, substitution substitutionArgument: String?,
         options: MountOptions) throws(Failure) {
        self.options = options
        main = try MountPlan.directory(mainArgument, role: "main bundle")
        if access(main, R_OK | X_OK) != 0 {
            throw Failure("main bundle \(mainArgument) cannot be read: \(Paths.describe(errno))")
        }
        mountpoint = try MountPlan.directory(mountArgument, role: "mountpoint")
        try MountPlan.checkNotMounted(mountpoint, argument: mountArgument)
        let wanted = substitutionArgument ?? options.substitution ?? Paths.defaultSubstitution(forMain: main)
        let kind = Paths.kind(wanted)
        if !kind.exists {
            if kind.error != ENOENT {
                throw Failure("substitution directory \(wanted) cannot be used: \(Paths.describe(kind.error))")
            }
            try Paths.makeDirectories(Paths.absolute(wanted))
        }
        substitution = try MountPlan.directory(wanted, role: "substitution directory")
    }

    /// A mountpoint that is already mounted, or the stale mount of a dead daemon (whose
    /// attributes the kernel may still answer from its cache), is refused.
    private static func checkNotMounted(_ path: String, argument: String) throws(Failure) {
        guard let existing = MountTable.current().mount(at: path) else { return }
        var st = statvfs()
        if statvfs(path, &st) != 0 && errno == ENOTCONN {
            throw Failure("mountpoint \(argument) is a stale mount (Transport endpoint is not connected); run: proxybundle unmount \(argument)")
        }
        throw Failure("mountpoint \(argument) is already a mount point (\(existing.type) from \(existing.source)); unmount it first")
    }

    private static func directory(_ argument: String, role: String) throws(Failure) -> String {
        let kind = Paths.kind(argument)
        if !kind.exists {
            if kind.error == ENOTCONN {
                throw Failure("\(role) \(argument) is a stale mount (Transport endpoint is not connected); run: proxybundle unmount \(argument)")
            }
            throw Failure("\(role) \(argument) does not exist")
        }
        guard kind.isDirectory else { throw Failure("\(role) \(argument) is not a directory") }
        guard let path = Paths.canonical(argument) else {
            throw Failure("\(role) \(argument) cannot be resolved: \(Paths.describe(errno))")
        }
        return path
    }
}
