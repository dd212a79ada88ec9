import Foundation
import XCTest

/// Every `proxybundle` command line in the README's code blocks is one the program accepts:
/// an example is parsed (with its `-o` options; PROXYBUNDLE_PARSE_ONLY, nothing is run), and a
/// synopsis (with `[`, `...`) names a command that exists and options its help lists. fstab
/// lines and `mount -t fuse.proxybundle` lines are checked as the helper call they become.
final class ReadmeCommandLinesTests: XCTestCase {
    private static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path + "/README.md"

    func testEveryCommandLineOfTheReadmeIsAccepted() throws {
        let lines = Self.commandLines(try String(contentsOfFile: Self.readme, encoding: .utf8))
        XCTAssertGreaterThan(lines.examples.count, 10, "\(lines.examples)")
        XCTAssertGreaterThan(lines.synopses.count, 5, "\(lines.synopses)")
        for words in lines.examples {
            let parsed = try Spawn.run(MountFixture.binary, words, environment: ["PROXYBUNDLE_PARSE_ONLY=1"])
            XCTAssertEqual(parsed.status, 0, "README: proxybundle \(words.joined(separator: " ")): \(parsed.error)")
        }
        for words in lines.synopses {
            guard let command = words.first else { continue }
            let help = try Spawn.run(MountFixture.binary, ["help", command])
            XCTAssertEqual(help.status, 0, "README synopsis: no command \(command)")
            let listed = Set(help.output.split(whereSeparator: { " ,\n[]".contains($0) }).map(String.init))
            for option in words where option.hasPrefix("-") {
                XCTAssertTrue(listed.contains(option), "README synopsis of \(command): \(option) is not in its help")
            }
        }
    }

    /// A wrong line is found: the check itself can fail.
    func testAWrongLineIsRefused() throws {
        for words in [["mount", "/a", "/b", "-o", "nosuchoption"], ["remount", "/a"], ["invalidate", "/a", "--every"], ["mout", "/a"]] {
            let parsed = try Spawn.run(MountFixture.binary, words, environment: ["PROXYBUNDLE_PARSE_ONLY=1"])
            XCTAssertNotEqual(parsed.status, 0, "\(words)")
        }
        let lines = Self.commandLines("```sh\nproxybundle layers MOUNTPOINT [--sett DIR]\nls | proxybundle status --json  # x\n```\n")
        XCTAssertEqual(lines.synopses, [["layers", "--sett"]])
        XCTAssertEqual(lines.examples, [["status", "--json"]])
    }

    /// The command lines of the code blocks in `text`, as the words after `proxybundle`: for
    /// a synopsis, the command and the options it names.
    static func commandLines(_ text: String) -> (examples: [[String]], synopses: [[String]]) {
        var examples: [[String]] = [], synopses: [[String]] = []
        let blocks = text.components(separatedBy: "```").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        for block in blocks {
            var joined: [String] = []
            for line in block.split(separator: "\n").map(String.init) {
                // a synopsis continues on lines that start with spaces
                if line.hasPrefix(" "), let last = joined.last, last.contains("[") { joined[joined.count - 1] += line } else { joined.append(line) }
            }
            for line in joined {
                let code = line.range(of: " #").map { String(line[..<$0.lowerBound]) } ?? line
                let words = code.split(separator: " ").map(String.init)
                if code.contains("[") || code.contains("...") {
                    guard let at = words.firstIndex(of: "proxybundle"), at + 1 < words.count else { continue }
                    let options = words[(at + 2)...].map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "[]|.")) }
                        .filter { $0.hasPrefix("-") }
                    synopses.append([words[at + 1]] + options)
                } else if words.starts(with: ["mount", "-t", "fuse.proxybundle"]) {
                    examples.append(Array(words.dropFirst(3)))
                } else if let type = words.firstIndex(of: "fuse.proxybundle"), type == 2, words.count >= 4 {
                    examples.append([words[0], words[1], "-o", words[3]])  // an fstab line
                } else if let at = words.firstIndex(of: "proxybundle"), at == 0 || words[at - 1] == "|" {
                    examples.append(Array(words[(at + 1)...]))
                }
            }
        }
        return (examples, synopses)
    }
}
