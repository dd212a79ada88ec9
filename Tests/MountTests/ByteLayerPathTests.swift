import Foundation
import XCTest

/// Layer and mountpoint paths are bytes, not text: a main bundle, substitution, patch,
/// mountpoint or log file whose path is not UTF-8 (`app\xE9`) mounts and is shown as the
/// bytes it is, by every command and control file (issue 23; before, `mount` refused such a
/// path, and earlier still reported it missing).
final class ByteLayerPathTests: XCTestCase {
    var fx: MountFixture!

    override func setUpWithError() throws { fx = try MountFixture(name) }

    override func tearDown() {
        // the mountpoints' names are not UTF-8: found by pattern, unmounted whatever happened
        _ = try? shell("for m in \"$R\"/mnt*; do mountpoint -q \"$m\" && fusermount3 -uz \"$m\"; done; true")
        fx?.tearDown()
    }

    /// Runs `command` in bash with B (the binary), R (the test's directory) and X (the byte
    /// 0xE9, which is not UTF-8 on its own) set.
    @discardableResult
    private func shell(_ command: String, environment: [String] = []) throws -> (status: Int32, output: String, error: String) {
        try Spawn.run("/bin/bash", ["-c", "B='\(MountFixture.binary)'; R='\(fx.root)'; X=$(printf '\\351'); " + command],
                      environment: environment, seconds: 60)
    }

    /// `command` succeeds; fails the test with its output otherwise.
    private func check(_ command: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try shell(command)
        XCTAssertEqual(result.status, 0, "\(what): \(result.output)\(result.error)", file: file, line: line)
    }

    func testEveryLayerAndTheMountpointMayHaveAPathThatIsNotUTF8() throws {
        let layers = "MAIN=\"$R/app$X/Resources\"; SUB=\"$R/sub$X\"; P=\"$R/patch$X\"; Q=\"$R/other$X\"; MNT=\"$R/mnt$X\"; "
        try check(layers + "mkdir -p \"$MAIN\" \"$SUB\" \"$P\" \"$Q\" \"$MNT\" && echo main > \"$MAIN/a.txt\" "
                  + "&& echo patch > \"$P/b.txt\" && echo other > \"$Q/b.txt\"", "the layers made")
        let mount = try shell(layers + "\"$B\" mount \"$MAIN\" \"$MNT\" --substitution \"$SUB\" --patch \"$P\" "
                              + "--log-file \"$R/log$X\"")
        XCTAssertEqual(mount.status, 0, mount.error)
        XCTAssertEqual(mount.error, "")
        try check(layers + "mountpoint -q \"$MNT\"", "mounted on the byte path")
        try check(layers + "[ \"$(cat \"$MNT/a.txt\")\" = main ] && [ \"$(cat \"$MNT/b.txt\")\" = patch ]", "the layers served")
        try check(layers + "echo new > \"$MNT/c.txt\" && [ \"$(cat \"$SUB/c.txt\")\" = new ]", "a write lands in the substitution")
        try check(layers + "[ -f \"$R/log$X\" ]", "the log file at its byte path")
        // what the commands and control files show is the paths' own bytes
        try check(layers + "\"$B\" status \"$MNT\" > \"$R/status\" && grep -qF \"$MAIN\" \"$R/status\" "
                  + "&& grep -qF \"$SUB\" \"$R/status\" && grep -qF \"$P\" \"$R/status\" && grep -qF \"$MNT\" \"$R/status\"",
                  "status names every path as its bytes")
        try check(layers + "grep -qxF \"main: $MAIN\" \"$MNT/.stats\" && grep -qxF \"substitution: $SUB\" \"$MNT/.stats\" "
                  + "&& grep -qxF \"patch: $P\" \"$MNT/.stats\" && grep -qxF \"mountpoint: $MNT\" \"$MNT/.stats\"",
                  ".stats names every path as its bytes")
        try check(layers + "cmp <(\"$B\" which \"$MNT/b.txt\") <(printf 'patch %s/b.txt\\n' \"$P\")", "which")
        try check(layers + "grep -qF \"$P\" \"$MNT/.layers\"", ".layers")
        try check(layers + "\"$B\" layers \"$MNT\" --set \"$Q\" && [ \"$(cat \"$MNT/b.txt\")\" = other ] "
                  + "&& grep -qF \"$Q\" \"$MNT/.layers\"", "a patch swapped for one at a byte path")
        try check(layers + "\"$B\" invalidate \"$MNT\"", "invalidate")
        let json = try shell(layers + "\"$B\" status \"$MNT\" --json")
        XCTAssertEqual(json.status, 0, json.error)
        // a byte that is not UTF-8 is written \udcXX (PEP 383's surrogateescape: Python's
        // os.fsencode gives the bytes back); read as Latin-1 instead, the rest is plain JSON
        XCTAssertTrue(json.output.contains("/app\\udce9/Resources\""), json.output)
        let plain = json.output.replacingOccurrences(of: "\\udc", with: "\\u00")
        let parsed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(plain.utf8)) as? [[String: Any]], plain)
        XCTAssertEqual(parsed.first?["main"] as? String, fx.root + "/app\u{E9}/Resources")
        XCTAssertEqual(parsed.first?["patches"] as? [String], [fx.root + "/other\u{E9}"])
        try check(layers + "\"$B\" unmount \"$MNT\" && ! mountpoint -q \"$MNT\"", "unmount")
    }

    /// Without --substitution, the default is named after the main bundle's last name, bytes
    /// and all, with the short hash of its whole path.
    func testTheDefaultSubstitutionOfAMainBundleWhosePathIsNotUTF8() throws {
        let environment = ["HOME=\(fx.root)/home", "XDG_CACHE_HOME="]
        let setup = "MAIN=\"$R/app$X\"; MNT=\"$R/mnt$X\"; "
        try check(setup + "mkdir -p \"$MAIN\" \"$MNT\" \"$R/home\" && echo main > \"$MAIN/a.txt\"", "the layers made")
        let mount = try shell(setup + "\"$B\" mount \"$MAIN\" \"$MNT\"", environment: environment)
        XCTAssertEqual(mount.status, 0, mount.error)
        try check(setup + "echo new > \"$MNT/c.txt\" && ls -d \"$R/home/.cache/proxybundle/app$X-\"*/patch "
                  + "&& [ \"$(cat \"$R/home/.cache/proxybundle/app$X-\"*/patch/c.txt)\" = new ]",
                  "the write landed in the default substitution, named with the main bundle's own bytes")
        try check(setup + "\"$B\" status \"$MNT\" | grep -qF \"$R/home/.cache/proxybundle/app$X-\"", "status shows it")
    }
}
