import Foundation
import XCTest

extension MountFixture {
    /// strace, with `arguments`, attached to every thread of the daemon (returns once it is)
    /// and writing to `trace`; the caller stops it.
    func traceDaemon(_ arguments: [String], into trace: String) throws -> pid_t {
        let tracer = try Spawn.start("/usr/bin/strace", ["-f", "-qq", "-p", "\(daemon)", "-o", trace] + arguments)
        let tasks = "/proc/\(daemon)/task"
        let deadline = Date().addingTimeInterval(20)
        while try !FileManager.default.contentsOfDirectory(atPath: tasks).allSatisfy({ task in
            let status = (try? String(contentsOfFile: "\(tasks)/\(task)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").contains { $0.hasPrefix("TracerPid:") && !$0.hasSuffix("\t0") }
        }) {
            guard Date() < deadline else {
                kill(tracer, SIGKILL)
                _ = Spawn.wait(tracer, seconds: 10)
                throw TestFailure("strace did not attach")
            }
            usleep(10_000)
        }
        return tracer
    }
}
