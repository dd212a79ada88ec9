import Foundation

/// A private mount namespace in which the system's package directories (/usr, /etc, /var) are
/// kernel overlays over the machine's own, with upper directories under `scratch`: a package
/// installed, used and removed there changes nothing of the machine, whatever it has
/// installed (a proxybundle package included). Commands run in it through nsenter
/// (`PrivateNamespace`).
final class PrivateSystem {
    private let namespace: PrivateNamespace
    static let overlaid = ["/usr", "/etc", "/var"]

    init(scratch: String) throws {
        namespace = try PrivateNamespace(scratch: scratch)
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
        try namespace.run(program, arguments, environment: environment, seconds: seconds)
    }

    /// Lets the namespace go (it ends with its last process) and its private mount.
    func remove() { namespace.remove() }
}
