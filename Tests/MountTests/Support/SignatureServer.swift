import Foundation

/// A lookaside signature store as a fleet reads it: Debian's nginx serving `directory/sigs`
/// over plain HTTP on 127.0.0.1 at a free port; pushes write into that directory (the
/// registries.d `lookaside-staging`, a file: URL). `stop()` ends it (tests call it in a
/// teardown block, so it runs on failure too).
final class SignatureServer {
    let directory: String
    let port: Int
    private(set) var pid: pid_t
    var served: String { directory + "/sigs" }
    var url: String { "http://127.0.0.1:\(port)" }

    private init(directory: String, port: Int, pid: pid_t) {
        self.directory = directory
        self.port = port
        self.pid = pid
    }

    static func start(in directory: String) throws -> SignatureServer {
        try Disk.mkdir(directory + "/sigs")
        try Disk.mkdir(directory + "/tmp")
        var lastLog = ""
        for _ in 0..<3 {  // another process may take the free port before nginx binds it
            let port = try Registry.freePort()
            let config = directory + "/nginx.conf"
            let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map { "\($0)_temp_path \(directory)/tmp;" }
            try """
                daemon off;
                master_process off;
                pid \(directory)/nginx.pid;
                error_log \(directory)/error.log;
                events { worker_connections 64; }
                http {
                  access_log \(directory)/access.log;
                  \(temporary.joined(separator: "\n  "))
                  server { listen 127.0.0.1:\(port); root \(directory)/sigs; }
                }
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let log = directory + "/nginx.out"
            let pid = try Spawn.start("/usr/sbin/nginx", ["-c", config, "-p", directory], stderrPath: log, stdoutPath: log)
            let server = SignatureServer(directory: directory, port: port, pid: pid)
            let deadline = Date().addingTimeInterval(20)
            while Date() < deadline {
                if Spawn.exited(pid) != nil { server.pid = 0; break }
                if Registry.connects(port) { return server }
                usleep(20_000)
            }
            server.stop()
            lastLog = ((try? String(contentsOfFile: directory + "/error.log", encoding: .utf8)) ?? "")
                + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        }
        throw TestFailure("nginx did not start: \(lastLog.suffix(600))")
    }

    /// A registries.d directory naming this store for `registry`: read over HTTP, written as files.
    func registriesDirectory(at path: String, for registry: Registry) throws -> String {
        try Disk.write(path + "/proxybundle-test.yaml", """
            docker:
              \(registry.host):
                lookaside: \(url)
                lookaside-staging: file://\(served)

            """)
        return path
    }

    /// The signature directory of `repository`'s image with manifest `digest`.
    func signatures(_ repository: String, _ digest: String) -> String {
        served + "/" + repository + "@" + digest.replacingOccurrences(of: ":", with: "=")
    }

    func stop() {
        guard pid > 0 else { return }
        Spawn.terminate(pid)
        pid = 0
    }
}
