import Foundation
import ProxyBundleCore
import XCTest

/// Scripts/bench.sh at its smallest: proxybundle alone, one quick round, the built binary (no
/// `swift build`, which would wait for the build lock `swift test` holds). Checks that every
/// workload produced a figure and that the benchmark's own correctness check passed.
final class BenchSmokeTests: XCTestCase {
    static let workloads = ["walk_cold", "walk_warm", "walk_types_cold", "list_huge", "list_huge_warm", "read_small_cold", "read_small_sorted", "seq_cold", "seq_warm",
                            "rand4k", "lookup", "lookup_again", "missing", "missing_again", "stat_one", "statfs", "invalidate", "create_sync", "copyup",
                            "stack_walk_cold", "stack_walk_warm", "stack_read_small_cold", "stack_missing", "stack_copyup"]

    private var out = ""

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw XCTSkip("bench.sh needs root (mounts, drop_caches)") }
        var template = Array("\(FileManager.default.temporaryDirectory.path)/pb-bench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp failed: \(errno)") }
        out = String(cString: made)
    }

    override func tearDown() {
        if !out.isEmpty { try? FileManager.default.removeItem(atPath: out) }
    }

    private static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Scripts/bench.sh").path
    }

    /// Runs bench.sh in a session of its own, so that on the deadline the whole group (the
    /// script, its timed commands and the daemon) is stopped and its traps unmount everything.
    private func bench(_ arguments: [String], seconds: Double) throws -> (status: Int32, log: String, pid: pid_t) {
        let log = out + "/bench.log"
        let pid = try Spawn.start("/usr/bin/setsid", [Self.script] + arguments, stderrPath: log, stdoutPath: log)
        var status = Spawn.wait(pid, seconds: seconds)
        if status == nil {
            kill(-pid, SIGTERM)
            status = Spawn.wait(pid, seconds: 20)
            if status == nil { kill(-pid, SIGKILL); _ = Spawn.wait(pid, seconds: 5) }
            XCTFail("bench.sh did not finish within \(seconds) s")
        }
        return (status ?? -1, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "", pid)
    }

    func testQuickRunOfProxybundleAloneReportsEveryWorkloadAndPassesItsChecks() throws {
        let results = out + "/results"
        let run = try bench(["--quick", "--only", "proxybundle", "--rounds", "1",
                             "--binary", MountFixture.binary, "--out", results], seconds: 600)
        XCTAssertEqual(run.status, 0, "bench.sh failed:\n\(run.log.suffix(3000))")

        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: results + "/results.json")))
        let object = try XCTUnwrap(json as? [String: Any], "results.json is not an object")
        for key in ["date", "kernel", "cores", "memory_kib", "scale", "rounds"] {
            XCTAssertNotNil(object[key], "results.json lacks \(key)")
        }
        let correctness = try XCTUnwrap((object["correctness"] as? [String: Any])?["proxybundle"] as? [String: Any])
        XCTAssertEqual(correctness["passed"] as? Bool, true, "correctness check: \(correctness)")
        let rows = try XCTUnwrap(object["workloads"] as? [[String: Any]])
        XCTAssertEqual(rows.compactMap { $0["name"] as? String }, Self.workloads)
        let markdown = try String(contentsOfFile: results + "/results.md", encoding: .utf8)
        for row in rows {
            let name = row["name"] as? String ?? "?"
            let figure = ((row["results"] as? [String: Any])?["proxybundle"] as? [String: Any])?["median"] as? Double
            XCTAssertNotNil(figure, "no figure for \(name)")
            let description = row["description"] as? String ?? "?"
            let line = markdown.split(separator: "\n").first { $0.hasPrefix("| \(description) |") }
            XCTAssertNotNil(line, "results.md has no row for \(name)")
            XCTAssertNotNil(line?.range(of: #"\| [0-9]+\.[0-9]+ "#, options: .regularExpression), "no time in \(line ?? "")")
        }
        XCTAssertTrue(markdown.contains("| correctness | ok |"), markdown)
        XCTAssertTrue(markdown.contains("daemon peak memory"), markdown)
        XCTAssertTrue(run.log.contains("| workload |"), "the table goes to stdout too")
        // setsid execs the script in place, so its $$ (which names its scratch directory) is run.pid
        let scratch = "/var/tmp/proxybundle-bench/run-\(run.pid)/"
        XCTAssertFalse(MountTable.current().mounts.contains { ($0.mountpoint.description + "/").hasPrefix(scratch) },
                       "bench.sh left a mount behind")
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch), "bench.sh left its scratch directory")
    }

    /// The chart bench.sh draws: a bar per workload and implementation, its length the ratio
    /// to kernel overlayfs in the same run.
    func testTheChartDrawsEachRatio() throws {
        let results = out + "/results"
        let run = try bench(["--quick", "--only", "proxybundle,kernel", "--rounds", "1", "--groups", "walk,stat",
                             "--binary", MountFixture.binary, "--out", results], seconds: 120)
        XCTAssertEqual(run.status, 0, "bench.sh failed:\n\(run.log.suffix(3000))")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: results + "/results.json")))
        let rows = try XCTUnwrap((json as? [String: Any])?["workloads"] as? [[String: Any]])
        let chart = try String(contentsOfFile: results + "/chart.svg", encoding: .utf8)
        XCTAssertTrue(chart.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""), String(chart.prefix(200)))
        XCTAssertTrue(chart.hasSuffix("</svg>\n"))
        var drawn = 0
        for row in rows {
            let name = row["name"] as? String ?? "?"
            guard let ratio = ((row["results"] as? [String: Any])?["proxybundle"] as? [String: Any])?["ratio_to_kernel"] as? Double
            else { continue }
            drawn += 1
            XCTAssertTrue(chart.contains("data-impl=\"proxybundle\" data-workload=\"\(name)\""), "no bar for \(name)")
            XCTAssertTrue(chart.contains(String(format: ">%.2f×</text>", ratio)), "no label \(ratio) for \(name)")
        }
        XCTAssertGreaterThanOrEqual(drawn, 3, "walk and stat give at least three ratios")
    }

    /// `--transports device,uring`: a column per transport, each with its figures and its
    /// correctness check, the module's io_uring switch on for the run and put back after.
    func testEachTransportGetsAColumn() throws {
        let path = "/sys/module/fuse/parameters/enable_uring"
        guard let before = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw MachineSkip.noUring(path)
        }
        let results = out + "/results"
        let run = try bench(["--quick", "--only", "proxybundle", "--transports", "device,uring", "--rounds", "1",
                             "--groups", "statfs,missing", "--binary", MountFixture.binary, "--out", results], seconds: 120)
        XCTAssertEqual(run.status, 0, "bench.sh failed:\n\(run.log.suffix(3000))")
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), before, "the module's switch put back")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: results + "/results.json")))
        let object = try XCTUnwrap(json as? [String: Any])
        XCTAssertEqual(object["implementations"] as? [String], ["proxybundle", "proxybundle-uring"])
        for implementation in ["proxybundle", "proxybundle-uring"] {
            let correctness = (object["correctness"] as? [String: Any])?[implementation] as? [String: Any]
            XCTAssertEqual(correctness?["passed"] as? Bool, true, "\(implementation): \(String(describing: correctness))")
        }
        let rows = try XCTUnwrap(object["workloads"] as? [[String: Any]])
        for name in ["statfs", "missing"] {
            let results = rows.first { $0["name"] as? String == name }?["results"] as? [String: Any]
            for implementation in ["proxybundle", "proxybundle-uring"] {
                XCTAssertNotNil((results?[implementation] as? [String: Any])?["median"] as? Double, "\(implementation) \(name)")
            }
        }
    }

    func testABrokenBinaryFailsTheRun() throws {
        let run = try bench(["--quick", "--only", "proxybundle", "--binary", out + "/missing-proxybundle",
                             "--out", out + "/results"], seconds: 600)
        XCTAssertNotEqual(run.status, 0, run.log)
    }
}
