import ArgumentParser
import CFuseShim
#if canImport(Glibc)
import Glibc
#endif

@main
struct ProxyBundle: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxybundle",
        abstract: "Change an application's resources without rebuilding it: a merged view of a read-only main bundle shadowed by a substitution directory.",
        discussion: """
            Example:
              proxybundle mount /opt/MyApp/Resources /mnt/myapp --substitution ~/.cache/myapp/patch
              proxybundle unmount /mnt/myapp
            """,
        subcommands: [MountCommand.self, UnmountCommand.self, InvalidateCommand.self]
    )

    /// Our own failures print one line and exit 1; argument errors keep the parser's format.
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let failure as Failure {
            failure.report()
            Glibc.exit(1)
        } catch {
            // --help and --version are reported as "errors" with a success code
            if exitCode(for: error) == .success { exit(withError: error) }
            let first = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            Failure(first + " (see proxybundle --help)").report()
            Glibc.exit(exitCode(for: error).rawValue)
        }
    }
}

/// A failure the user can act on, reported as one line on stderr.
struct Failure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) { self.description = description }

    func report() {
        let line = "proxybundle: \(description)\n"
        line.withCString { pb_write_stderr($0, strlen($0)) }
    }
}
