import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

/// Starting another program from the command (the detached daemon, fusermount3): one
/// posix_spawn for both. (ProxyBundleDelivery's `ChildProcess` runs its helpers with their
/// standard error captured; this target does not depend on that type's internals.)
enum Spawn {
    /// What a descriptor of the child is.
    enum Descriptor {
        case null
        case copy(of: Int32)
    }

    /// Starts `program` (an absolute path, or a name looked for on the PATH) with `argv`
    /// (its name first) and `environment` (nil: this process's), each of `descriptors` given
    /// at its number; the others are inherited unless close-on-exec. `newSession`: the child
    /// leads a session of its own. The child's pid, or the errno of the failure.
    static func start(_ program: String, _ argv: [[UInt8]], environment: [[UInt8]]? = nil,
                      descriptors: [Int32: Descriptor] = [:], newSession: Bool = false) -> Result<pid_t, Errno> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // the sources moved above every descriptor the child is given, so that no dup2
        // overwrites another's source
        var sources: [Int32] = []
        defer { sources.forEach { close($0) } }
        for (target, descriptor) in descriptors.sorted(by: { $0.key < $1.key }) {
            switch descriptor {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .copy(let fd):
                let source = fcntl(fd, F_DUPFD_CLOEXEC, max(10, (descriptors.keys.max() ?? 0) + 1))
                guard source >= 0 else { return .failure(Errno(errno)) }
                sources.append(source)
                posix_spawn_file_actions_adddup2(&actions, source, target)
            }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if newSession { posix_spawnattr_setflags(&attributes, pb_POSIX_SPAWN_SETSID) }
        let arguments = argv.map { $0.withCStringCopy { strdup($0) } } + [nil]
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let result: Int32
        if let environment {
            let entries = environment.map { $0.withCStringCopy { strdup($0) } } + [nil]
            defer { entries.forEach { free($0) } }
            result = program.contains("/") ? posix_spawn(&pid, program, &actions, &attributes, arguments, entries)
                : posix_spawnp(&pid, program, &actions, &attributes, arguments, entries)
        } else {
            result = program.contains("/") ? posix_spawn(&pid, program, &actions, &attributes, arguments, environ)
                : posix_spawnp(&pid, program, &actions, &attributes, arguments, environ)
        }
        return result == 0 ? .success(pid) : .failure(Errno(result))
    }
}
