import Foundation

/// A private mount namespace in which the system's package directories (/usr, /etc, /var) are
/// kernel overlays over the machine's own, with upper directories under `scratch`: a package
/// installed, used and removed there changes nothing of the machine, whatever it has
/// installed (a proxybundle package included). Commands run in it through nsenter; the
/// namespace is kept by a bind mount of it on a file in a private mount of its own.
final class PrivateSystem {
    private let scratch: String
    private let handle: String
    static let overlaid = ["/usr", "/etc", "/var"]

    init(scratch: String) throws {
        self.scratch = scratch
        let holder = scratch + "/namespace"
        handle = holder + "/mnt"
        try Disk.mkdir(holder)
        // a namespace can be kept only on a mount that does not share its events
        guard mount(holder, holder, nil, UInt(MS_BIND), nil) == 0,
              mount(nil, holder, nil, UInt(MS_PRIVATE), nil) == 0 else {
            throw TestFailure("private bind mount of \(holder): \(String(cString: strerror(errno)))")
        }
        close(open(handle, O_CREAT | O_WRONLY, 0o600))
        let made = try Spawn.run("/usr/bin/unshare", ["--mount=\(handle)", "--propagation", "private", "/bin/true"])
        guard made.status == 0 else { throw TestFailure("unshare: \(made.error)") }
        for (index, directory) in PrivateSystem.overlaid.enumerated() {
            let upper = scratch + "/upper\(index)", work = scratch + "/work\(index)"
            try Disk.mkdir(upper)
            try Disk.mkdir(work)
            let mounted = try run("/bin/mount", ["-t", "overlay", "overlay", "-o",
                                                 "lowerdir=\(directory),upperdir=\(upper),workdir=\(work)", directory])
            guard mounted.status == 0 else { throw TestFailure("overlay on \(directory) in the namespace: \(mounted.error)") }
        }
    }

    /// Runs `program` in the namespace.
    func run(_ program: String, _ arguments: [String], environment: [String] = [],
             seconds: Double = 120) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/usr/bin/nsenter", ["--mount=\(handle)", "--", program] + arguments,
                      environment: environment, seconds: seconds)
    }

    /// Lets the namespace go (it ends with its last process) and its private mount.
    func remove() {
        _ = umount2(handle, Int32(MNT_DETACH))
        _ = umount2(scratch + "/namespace", Int32(MNT_DETACH))
    }
}
