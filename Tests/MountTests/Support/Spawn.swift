import Foundation

/// Child processes without Foundation's Process, so the daemon can get its own environment,
/// a log file for stderr, and be waited for with a deadline.
enum Spawn {
    static func start(_ program: String, _ arguments: [String], stderrPath: String? = nil,
                      stdoutPath: String? = nil, environment extra: [String] = []) throws -> pid_t {
        if program == MountFixture.binary { MountFixture.noteCommand(arguments) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdoutPath {
            posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        if let stderrPath {
            posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        // `extra` wins over the same names in this process's environment
        // the logs of detached daemons without syslog go under /tmp, not the tester's home (a
        // directory every user of the tests may write to, as their homes would be)
        let extra = ["XDG_STATE_HOME=\(Spawn.stateDirectory)"] + extra
        let overridden = Set(extra.map { String($0.prefix { $0 != "=" }) })
        let inherited = ProcessInfo.processInfo.environment.filter { !overridden.contains($0.key) }.map { "\($0.key)=\($0.value)" }
        var merged: [String: String] = [:]
        for pair in extra { merged[String(pair.prefix { $0 != "=" })] = pair }  // the last given wins
        let env = (inherited + merged.values).map { strdup($0) } + [nil]
        defer { env.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, nil, argv, env)
        guard result == 0 else { throw TestFailure("cannot start \(program): \(String(cString: strerror(result)))") }
        return pid
    }

    /// The exit status if `pid` has ended (a signal counts as 128 + signal), else nil.
    static func exited(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        guard result == pid else { return result < 0 ? -1 : nil }
        return decode(status)
    }

    /// Ends a server started by `start`: SIGTERM, then SIGKILL if it has not ended within 10 s.
    static func terminate(_ pid: pid_t) {
        kill(pid, SIGTERM)
        if wait(pid, seconds: 10) == nil {
            kill(pid, SIGKILL)
            _ = wait(pid, seconds: 5)
        }
    }

    static func wait(_ pid: pid_t, seconds: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let status = exited(pid) { return status }
            usleep(5_000)
        }
        return nil
    }

    static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Runs a command to completion; returns its status, stdout and stderr.
    /// `XDG_STATE_HOME` of the processes started: made once, writable by every user.
    static let stateDirectory: String = {
        let path = FileManager.default.temporaryDirectory.path + "/pb-test-state"
        for dir in [path, path + "/proxybundle"] {
            mkdir(dir, 0o1777)
            chmod(dir, 0o1777)
        }
        return path
    }()

    static func run(_ program: String, _ arguments: [String], environment: [String] = [],
                    seconds: Double = 60) throws -> (status: Int32, output: String, error: String) {
        let dir = FileManager.default.temporaryDirectory.path
        let out = "\(dir)/pb-run-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).out"
        let err = out + ".err"
        defer { unlink(out); unlink(err) }
        let pid = try start(program, arguments, stderrPath: err, stdoutPath: out, environment: environment)
        guard let status = wait(pid, seconds: seconds) else {
            kill(pid, SIGKILL)
            _ = wait(pid, seconds: 5)
            throw TestFailure("\(program) \(arguments) did not finish within \(seconds) s")
        }
        let output = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let error = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        return (status, output, error)
    }
}

/// Runs the built `proxybundle` with `arguments` to its end (60 s at most): status, standard
/// output and standard error.
func proxybundle(_ arguments: [String], environment: [String] = []) throws -> (status: Int32, output: String, error: String) {
    try Spawn.run(MountFixture.binary, arguments, environment: environment, seconds: 60)
}
