import Foundation

/// Where in the kernel a process sleeps (/proc/PID/wchan): a test waits until a caller of the
/// mount is inside it instead of sleeping for a time and hoping it got there.
enum KernelWait {
    static func channel(_ pid: pid_t) -> String {
        (try? String(contentsOfFile: "/proc/\(pid)/wchan", encoding: .utf8)) ?? ""
    }

    /// Whether `pid` waits for the answer to a FUSE request: the request is the daemon's.
    static func waitsForTheDaemon(_ pid: pid_t) -> Bool { channel(pid) == "request_wait_answer" }

    /// Whether `pid`, a child not reaped yet, has ended (a zombie): its pid is still its own.
    static func hasEnded(_ pid: pid_t) -> Bool {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }

    /// Whether `pid` has ended or waits for the daemon's answer.
    static func isInTheDaemonOrDone(_ pid: pid_t) -> Bool { waitsForTheDaemon(pid) || hasEnded(pid) }
}

extension KernelWait {
    /// Whether no thread of `pid` runs or waits to run (state R): a daemon done with its
    /// last request and its polling.
    static func allThreadsSleep(_ pid: pid_t) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return !tasks.isEmpty && tasks.allSatisfy { task in
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8)) ?? ""
            guard let close = stat.lastIndex(of: ")") else { return true }
            return stat[stat.index(after: close)...].split(separator: " ").first != "R"
        }
    }
}
