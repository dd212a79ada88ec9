import Foundation
import ProxyBundleCore
import XCTest

/// What a new user types first: --version, help, and the errors of a mistyped command.
final class HelpAndVersionTests: XCTestCase {
    private static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// `--version`, `-V` and `version` print the version and the commit the binary was built
    /// from (as `git describe` names the checkout), and the kernel's FUSE features.
    func testVersionNamesTheCommitAndTheKernelFeatures() throws {
        let described = try Spawn.run("/usr/bin/git", ["-C", Self.repository, "describe", "--always", "--dirty",
                                                         "--abbrev=12", "--exclude=*"])
        try XCTSkipIf(described.status != 0, "not a git checkout: \(described.error)")
        let commit = described.output.trimmingCharacters(in: .whitespacesAndNewlines)
        for arguments in [["--version"], ["-V"], ["version"]] {
            let result = try proxybundle(arguments)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.error)")
            let lines = result.output.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.first, "proxybundle \(Version.number) (commit \(commit))", "\(arguments)")
            XCTAssertEqual(lines.count, 2, result.output)
            for word in ["passthrough", "epoch notification", "io_uring"] {
                XCTAssertTrue(lines.last?.contains(word) ?? false, "\(arguments): \(result.output)")
            }
        }
    }

    /// A running daemon says its own version in `.stats` and `status --json` (it may be older
    /// than the command asking).
    func testTheDaemonTellsItsVersion() throws {
        let fx = try MountFixture(name)
        defer { fx.tearDown() }
        try fx.start()
        let stats = try fx.stats()
        XCTAssertEqual(stats["version"], Version.number)
        XCTAssertEqual(stats["commit"], Version.commit)
        let status = try proxybundle(["status", fx.mountpoint, "--json"])
        XCTAssertTrue(status.output.contains("\"version\":\"\(Version.number)\",\"commit\":\"\(Version.commit)\""), status.output)
    }

    func testAnUnknownCommandIsAnErrorThatListsTheCommands() throws {
        for arguments in [["help", "mnt"], ["mnt"], ["mnt", "--help"]] {
            let result = try proxybundle(arguments)
            XCTAssertEqual(result.status, 64, "\(arguments)")
            XCTAssertEqual(result.output, "")
            XCTAssertTrue(result.error.hasPrefix("proxybundle: unknown command 'mnt': the commands are check, export, gc, help,"),
                          result.error)
            XCTAssertEqual(result.error.filter { $0 == "\n" }.count, 1, result.error)
        }
        XCTAssertEqual(try proxybundle(["help", "mount"]).status, 0)
    }

    /// `proxybundle` alone is a usage error (64, as the man page says), in one line.
    func testNoCommandIsAUsageError() throws {
        let bare = try proxybundle([])
        XCTAssertEqual(bare.status, 64)
        XCTAssertEqual(bare.output, "")
        XCTAssertTrue(bare.error.hasPrefix("proxybundle: give a command: check, export, gc, help, invalidate, layers, mount, pull, push, "), bare.error)
        XCTAssertEqual(bare.error.split(separator: "\n").count, 1, bare.error)
    }

    /// One version text, however asked; the root's help lists -V; no command's help repeats it.
    func testEveryWayOfAskingTheVersionGivesTheSameText() throws {
        let version = try proxybundle(["--version"])
        XCTAssertEqual(version.status, 0)
        for words in [["-V"], ["version"], ["mount", "--version"], ["status", "-V"]] {
            XCTAssertEqual(try proxybundle(words).output, version.output, "\(words)")
        }
        XCTAssertTrue(try proxybundle(["--help"]).output.contains("-V, --version"))
        for command in ["mount", "unmount", "remount", "resolve"] {
            XCTAssertFalse(try proxybundle(["help", command]).output.contains("--version"), command)
        }
    }

    func testAnInvalidValueListsTheValidOnesOnOneLine() throws {
        let result = try proxybundle(["mount", "/a", "/b", "--log-level", "verbose"])
        XCTAssertEqual(result.status, 64)
        XCTAssertEqual(result.error, "proxybundle: The value 'verbose' is invalid for '--log-level <log-level>'. Please "
                       + "provide one of the following: trace, debug, info, notice, warning, error, critical "
                       + "(see proxybundle --help)\n")
    }

    /// Every example line of every help text is a whole command at the width help is printed
    /// with when not on a terminal (80 columns): it can be copied.
    func testHelpExamplesAreWholeLines() throws {
        let commands = ["", "mount", "unmount", "invalidate", "status", "which", "layers", "resolve", "check"]
        var examples = 0
        for command in commands {
            let result = try proxybundle(command.isEmpty ? ["--help"] : ["help", command], environment: ["COLUMNS="])
            XCTAssertEqual(result.status, 0, command)
            var inExamples = false
            for line in result.output.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("Example") || line.hasPrefix("As a mount helper") {
                    inExamples = true
                    continue
                }
                if line.isEmpty || !line.hasPrefix(" ") { inExamples = false }
                guard inExamples else { continue }
                examples += 1
                let starts = ["  proxybundle ", "  mount -t ", "  /srv/app /mnt/app fuse.proxybundle "]
                XCTAssertTrue(starts.contains { line.hasPrefix($0) }, "\(command): a broken example line: '\(line)'")
            }
        }
        XCTAssertGreaterThan(examples, commands.count)
    }
}
