import Foundation
import XCTest

/// `push` and `pull` on a terminal (`script` gives them one) show their progress: skopeo's
/// transfer, then our status line for writing or extracting each layer, rewritten in place and
/// ended by what it came to; with standard error not a terminal they print nothing there.
final class TerminalProgressTests: RegistryTestCase {
    /// Runs `proxybundle ARGUMENTS` under `script`, on a pseudo-terminal: its status and what
    /// the terminal showed.
    func onTerminal(_ arguments: [String]) throws -> (status: Int32, shown: String) {
        let command = ([MountFixture.binary] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            .joined(separator: " ")
        // a terminal 120 columns wide: with none set, skopeo's bars shrink to an ellipsis
        let run = try Spawn.run("/usr/bin/script", ["-qfec", "stty cols 120 rows 40; exec " + command, "/dev/null"],
                                environment: ["TERM=xterm"])
        return (run.status, run.output)
    }

    func testPushAndPullShowProgressOnATerminalOnly() throws {
        let source = fx.root + "/patch"
        for i in 0..<50 { try Disk.write(source + "/strings/\(i).txt", String(repeating: "text \(i) ", count: 2000)) }
        let reference = "\(registry.host)/app:v1"

        let push = try onTerminal(["push", source, reference, "--tls-verify=false"])
        XCTAssertEqual(push.status, 0, push.shown)
        XCTAssertTrue(push.shown.contains("\r\u{1B}[K\(source): writing the layer"), push.shown.debugDescription)
        XCTAssertTrue(push.shown.range(of: "\r\u{1B}\\[K\(source): layer of [0-9.]+ [kM]B, 52 entries, [0-9.]+ [kM]B compressed, in "
                                           + "[0-9.]+ s \\([0-9.]+ [kMG]?B/s\\)\r\n", options: .regularExpression) != nil,
                      push.shown.debugDescription)
        XCTAssertTrue(push.shown.contains("Copying blob"), "skopeo's transfer: \(push.shown.debugDescription)")

        let pull = try onTerminal(["pull", reference, "--store", store, "--tls-verify=false"])
        XCTAssertEqual(pull.status, 0, pull.shown)
        XCTAssertTrue(pull.shown.contains("Copying blob"), "skopeo's transfer: \(pull.shown.debugDescription)")
        XCTAssertTrue(pull.shown.range(of: "\r\u{1B}\\[Klayer 1/1 sha256:[0-9a-f]{12}: checking [0-9.]+ [kM]B(\r\u{1B}\\[K[^\r\n]*)*"
                                           + "\r\u{1B}\\[Klayer 1/1 sha256:[0-9a-f]{12}: extracted [0-9.]+ [kM]B in [0-9.]+ s "
                                           + "\\([0-9.]+ [kMG]?B/s\\)\r\n", options: .regularExpression) != nil,
                      "checking, then extracting, rewritten in place: \(pull.shown.debugDescription)")
        XCTAssertTrue(pull.shown.contains("\(reference): 1 of 1 layers extracted, "), pull.shown.debugDescription)
        XCTAssertTrue(pull.shown.contains(store + "/layers/sha256/"), "the patches still go to standard output")

        let again = try onTerminal(["pull", reference, "--store", store, "--tls-verify=false"])
        XCTAssertTrue(again.shown.contains("\r\u{1B}[Klayer 1/1 sha256:"), again.shown.debugDescription)
        XCTAssertTrue(again.shown.contains(": already in the store\r\n"), again.shown.debugDescription)

        // not a terminal: nothing but the answer (and the one line Debian's policy, which
        // accepts anything, earns an image: unverified)
        let quietPush = try Spawn.run(MountFixture.binary, ["push", source, "\(registry.host)/app:v2", "--tls-verify=false"])
        XCTAssertEqual(quietPush.status, 0, quietPush.error)
        XCTAssertEqual(quietPush.error, "")
        let quietPull = try Spawn.run(MountFixture.binary, ["pull", "\(registry.host)/app:v2", "--store", fx.root + "/store2",
                                                            "--tls-verify=false"])
        XCTAssertEqual(quietPull.status, 0, quietPull.error)
        XCTAssertEqual(quietPull.error, "proxybundle: \(registry.host)/app:v2: unverified: the policy /etc/containers/policy.json "
                           + "accepts it without a signature\n")
        XCTAssertEqual(quietPull.output.split(separator: "\n").count, 1, quietPull.output)
    }
}
