import ArgumentParser
import CSyscalls
import ProxyBundleCore
#if canImport(Glibc)
import Glibc
#endif

@main
struct ProxyBundle: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxybundle",
        abstract: "Change an application's resources without rebuilding it: a merged view of a read-only main bundle under read-only patches under a substitution directory.",
        discussion: """
            Examples:
              proxybundle mount /srv/app /mnt/app --substitution ~/app-patch
              proxybundle mount /srv/app /mnt/app --patch /srv/fix --patch /srv/base
              proxybundle layers /mnt/app --set /srv/fix-2 /srv/base
              proxybundle remount /mnt/app -o ro
              proxybundle resolve /mnt/app Images/icon --image --scale 3
              proxybundle check /mnt/app
              proxybundle unmount /mnt/app

            As a mount helper (on the PATH, e.g. /usr/bin/proxybundle), and in /etc/fstab:
              mount -t fuse.proxybundle /srv/app /mnt/app -o substitution=/var/app
              /srv/app /mnt/app fuse.proxybundle substitution=/var/app 0 0
            """,
        subcommands: [MountCommand.self, UnmountCommand.self, InvalidateCommand.self, StatusCommand.self,
                      WhichCommand.self, LayersCommand.self, PullCommand.self, PushCommand.self, ExportCommand.self, GCCommand.self, RemountCommand.self, ResolveCommand.self, CheckCommand.self,
                      VersionCommand.self]
    )

    // Handled in main before parsing (as `version` does); here for the help and the man page.
    // Declared on the root only: swift-argument-parser's own version flag repeats itself in
    // every subcommand's help, with a shorter text than this one.
    @Flag(name: [.customLong("version"), .customShort("V")],
          help: "Print the version, the git commit and the kernel's FUSE features (as the version command).")
    var version = false

    /// Our own failures print one line and exit 1; argument errors keep the parser's format.
    static func main() {
        // paths are bytes: the arguments as text that keeps every byte (see RawArguments)
        let arguments = RawArguments.all
        LayerStack.raiseOpenFileLimit()  // the daemon, which, check and status open every layer
        if arguments.count > 1 && arguments[1] == DaemonImage.marker {
            Glibc.exit(DaemonImage.serve(Array(arguments.dropFirst(2))))
        }
        if arguments.count > 1 && arguments[1] == AutoUnmount.marker {
            Glibc.exit(AutoUnmount.run(Array(arguments.dropFirst(2))))
        }
        let given = Array(arguments.dropFirst())
        // `proxybundle --version`, and `proxybundle COMMAND --version` the same
        if let last = given.last, last == "--version" || last == "-V",
           given.count == 1 || (given.count == 2 && MountHelper.commands.contains(given[0])) {
            print(VersionCommand.text)
            Glibc.exit(0)
        }
        if given.isEmpty {
            Failure(text: "give a command: \(commandList) (see proxybundle --help)").report()
            Glibc.exit(ExitCode.validationFailure.rawValue)
        }
        if let unknown = unknownCommand(given) {
            Failure("unknown command '\(unknown)': the commands are \(commandList)")
                .report()
            Glibc.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot(MountHelper.arguments(given))
            if getenv(parseOnlyVariable) != nil {
                // the tests' check of the command lines the README shows: parsed, not run
                if let mount = command as? MountCommand { _ = try MountOptions(mount.optionWords) }
                Glibc.exit(0)
            }
            try command.run()
        } catch let failure as Failure {
            failure.report()
            Glibc.exit(1)
        } catch let code as ExitCode {
            // an answer given by the exit status alone (check found something)
            Glibc.exit(code.rawValue)
        } catch {
            // --help is reported as an "error" with a success code
            if exitCode(for: error) == .success { exit(withError: error) }
            Failure(text: oneLine(message(for: error)) + " (see proxybundle --help)").report()
            Glibc.exit(exitCode(for: error).rawValue)
        }
    }

    /// Set: a command line is parsed (with its `-o` options) and not run; exit status 0 when
    /// it is accepted.
    static let parseOnlyVariable = "PROXYBUNDLE_PARSE_ONLY"

    static var commandList: String { MountHelper.commands.sorted().joined(separator: ", ") }

    /// The first word when it is neither a command, an option nor a path (a mount helper's
    /// call), or the word after `help` when that is not a command.
    static func unknownCommand(_ arguments: [String]) -> String? {
        guard let first = arguments.first, !first.hasPrefix("-"), MountHelper.arguments(arguments).first != "mount" || first == "mount"
        else { return nil }
        if first == "help" {
            return arguments.dropFirst().first { !$0.hasPrefix("-") && !MountHelper.commands.contains($0) }
        }
        return MountHelper.commands.contains(first) ? nil : first
    }

    /// A parser message on one line: a list it puts on the following lines (the values an
    /// option takes) follows, separated by commas.
    static func oneLine(_ message: String) -> String {
        let lines = message.split(separator: "\n").map { $0.drop { $0 == " " } }.filter { !$0.isEmpty }
        guard let first = lines.first else { return message }
        let rest = lines.dropFirst().map { $0.hasPrefix("- ") ? String($0.dropFirst(2)) : String($0) }
        return rest.isEmpty ? String(first) : first + " " + rest.joined(separator: ", ")
    }
}

/// A failure the user can act on, reported as one line on stderr. A path in it is written as
/// the bytes it was given as (see `ByteText`).
struct Failure: Error, CustomStringConvertible {
    var line: ByteText

    init(_ line: ByteText) { self.line = line }
    init(text: String) { line = ByteText(bytes: Array(text.utf8)) }

    /// The line as text (bytes that are not UTF-8 replaced): for logs.
    var description: String { String(decoding: line.bytes, as: UTF8.self) }

    func report() {
        let text = Array("proxybundle: ".utf8) + line.bytes + [UInt8(ascii: "\n")]
        text.withCStringCopy { pb_write_stderr($0, text.count) }
    }
}
