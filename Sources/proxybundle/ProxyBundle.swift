import ArgumentParser
import CSyscalls
#if canImport(Glibc)
import Glibc
#endif

@main
struct ProxyBundle: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxybundle",
        abstract: "Change an application's resources without rebuilding it: a merged view of a read-only main bundle under read-only patches under a substitution directory.",
        discussion: """
            Example:
              proxybundle mount /opt/MyApp/Resources /mnt/myapp --substitution ~/.cache/myapp/patch
              proxybundle mount /opt/MyApp/Resources /mnt/myapp --patch /srv/hotfix --patch /srv/base
              proxybundle layers /mnt/myapp --set /srv/hotfix-2 /srv/base
              proxybundle unmount /mnt/myapp

            As a mount helper (installed on the PATH, e.g. /usr/local/bin/proxybundle):
              mount -t fuse.proxybundle /opt/MyApp/Resources /mnt/myapp -o substitution=/var/cache/myapp/patch
              /etc/fstab: /opt/MyApp/Resources /mnt/myapp fuse.proxybundle substitution=/var/cache/myapp/patch 0 0
            """,
        subcommands: [MountCommand.self, UnmountCommand.self, InvalidateCommand.self, StatusCommand.self,
                      WhichCommand.self, LayersCommand.self, ResolveCommand.self, CheckCommand.self]
    )

    /// Our own failures print one line and exit 1; argument errors keep the parser's format.
    static func main() {
        let arguments = CommandLine.arguments
        if arguments.count > 1 && arguments[1] == DaemonImage.marker {
            Glibc.exit(DaemonImage.serve(Array(arguments.dropFirst(2))))
        }
        do {
            var command = try parseAsRoot(MountHelper.arguments(Array(CommandLine.arguments.dropFirst())))
            try command.run()
        } catch let failure as Failure {
            failure.report()
            Glibc.exit(1)
        } catch let code as ExitCode {
            // an answer given by the exit status alone (check found something)
            Glibc.exit(code.rawValue)
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
