#if canImport(Glibc)
import Glibc
#endif

/// A helper program (skopeo, gzip, zstd) run with chosen descriptors; found on the PATH.
struct ChildProcess {
    let pid: pid_t
    let program: String
    /// The read end of its standard output when `captureOutput`, else -1.
    let output: Int32
    /// The read end of its standard error (always captured, for the one-line report).
    let errors: Int32

    /// Starts `program`; its standard input is `input` (or /dev/null when -1), its standard
    /// output a pipe (`captureOutput`) or `outputTo` (or /dev/null when -1).
    init(_ program: String, _ arguments: [String], input: Int32 = -1, captureOutput: Bool = false, outputTo: Int32 = -1) throws {
        var outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        if captureOutput { try ChildProcess.makePipe(&outPipe) }
        try ChildProcess.makePipe(&errPipe)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if input >= 0 { posix_spawn_file_actions_adddup2(&actions, input, 0) }
        else { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
        if captureOutput { posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1) }
        else if outputTo >= 0 { posix_spawn_file_actions_adddup2(&actions, outputTo, 1) }
        else { posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        // the default action for SIGPIPE, whatever this process set: a decoder we stop reading ends
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF))
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, program, &actions, &attributes, argv, environ)
        if captureOutput { close(outPipe[1]) }
        close(errPipe[1])
        guard result == 0 else {
            if captureOutput { close(outPipe[0]) }
            close(errPipe[0])
            throw DeliveryError("cannot run \(program): \(String(cString: strerror(result)))"
                                    + (result == ENOENT ? " (install it: apt-get install \(program))" : ""))
        }
        self.pid = pid
        self.program = program
        output = captureOutput ? outPipe[0] : -1
        errors = errPipe[0]
    }

    private static func makePipe(_ ends: inout [Int32]) throws {
        guard pipe(&ends) == 0 else { throw DeliveryError("cannot make a pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    }

    /// Waits for the end; returns the exit status (128 + signal) and the last line of its
    /// standard error. Closes the pipes.
    func wait() -> (status: Int32, message: String) {
        let (status, lines) = waitForLines()
        return (status, lines.last ?? "")
    }

    /// Waits for the end; returns the exit status (128 + signal) and the lines of its standard
    /// error (the last `keep` bytes of it), blank ones left out. Closes the pipes.
    func waitForLines(keep: Int = 65536) -> (status: Int32, lines: [String]) {
        if output >= 0 { close(output) }  // a child still writing gets EPIPE rather than blocking us
        let (_, lines) = drain(outputLimit: 0, keep: keep)
        return (reap(), lines)
    }

    /// Reads its standard output (`captureOutput`; nil once longer than `limit`, and the child
    /// is then killed) and its standard error together, so that neither pipe fills up and
    /// stalls it while the other is read; waits for the end. Closes the pipes.
    func collect(outputLimit limit: Int, keep: Int = 65536) -> (status: Int32, output: [UInt8]?, lines: [String]) {
        let (bytes, lines) = drain(outputLimit: limit, keep: keep)
        return (reap(), bytes, lines)
    }

    private func drain(outputLimit: Int, keep: Int) -> (output: [UInt8]?, lines: [String]) {
        var out: [UInt8]? = output >= 0 && outputLimit > 0 ? [] : nil
        var text: [UInt8] = []
        var fds = [pollfd(fd: errors, events: Int16(POLLIN), revents: 0)]
        if out != nil { fds.append(pollfd(fd: output, events: Int16(POLLIN), revents: 0)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while fds.contains(where: { $0.fd >= 0 }) {
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let n = read(fds[index].fd, &buffer, buffer.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { close(fds[index].fd); fds[index].fd = -1; continue }
                if fds[index].fd == errors {
                    text.append(contentsOf: buffer[0..<n])
                    if text.count > 2 * keep { text.removeFirst(text.count - keep) }
                } else if out != nil {
                    out?.append(contentsOf: buffer[0..<n])
                    if let count = out?.count, count > outputLimit {
                        out = nil
                        kill(pid, SIGKILL)
                        close(fds[index].fd)
                        fds[index].fd = -1
                    }
                }
            }
        }
        if text.count > keep { text.removeFirst(text.count - keep) }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n").map { $0.trimmingSpaces }.filter { !$0.isEmpty }
        return (out, lines.map(String.init))
    }

    /// Waits for the end: the exit status, 128 + the signal for one that was killed.
    private func reap() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Ends it (the caller no longer reads what it writes) and waits.
    func stop() {
        kill(pid, SIGKILL)
        _ = wait()
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" || first == "\r" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" || last == "\r" { text = text.dropLast() }
        return text
    }
}
