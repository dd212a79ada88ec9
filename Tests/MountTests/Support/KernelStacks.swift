import Foundation

/// The kernel stacks of process `pid`'s threads (/proc/PID/task/TID/stack, root only): where
/// each waits, to tell that a request reached a known point.
func kernelStacks(_ pid: pid_t) -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/stack", encoding: .utf8) }
}
