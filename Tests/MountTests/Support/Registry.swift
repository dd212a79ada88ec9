import Foundation

/// A CNCF distribution registry (Debian's docker-registry) on 127.0.0.1 at a free port, its
/// storage and log in a temporary directory; `stop()` ends it (tests call it in a defer and
/// in a teardown block, so it runs on failure too).
final class Registry {
    let directory: String
    let port: Int
    private(set) var pid: pid_t
    var host: String { "127.0.0.1:\(port)" }
    var logPath: String { directory + "/registry.log" }

    private init(directory: String, port: Int, pid: pid_t) {
        self.directory = directory
        self.port = port
        self.pid = pid
    }

    /// With `secure`: the registry's test CA (`trust/ca.crt`, as skopeo's --cert-dir takes it)
    /// and the user and password it demands.
    static let user = "fleet", password = "s3cret-pass"
    var certificates: String { directory + "/trust" }

    /// Starts a registry storing under `directory` (made if missing): plain HTTP, or with
    /// `secure` HTTPS with a certificate from a test CA and basic auth (htpasswd, bcrypt).
    static func start(in directory: String, secure: Bool = false) throws -> Registry {
        try Disk.mkdir(directory + "/data")
        let security = secure ? try makeSecurity(directory) : ""
        var lastLog = ""
        for _ in 0..<3 {  // another process may take the free port before the registry binds it
            let port = try freePort()
            let config = directory + "/config.yml"
            try """
                version: 0.1
                log: { level: info, accesslog: { disabled: false } }
                storage: { filesystem: { rootdirectory: \(directory)/data }, delete: { enabled: true } }
                http: { addr: 127.0.0.1:\(port)\(security.isEmpty ? "" : ", tls: { certificate: \(directory)/certs/server.crt, key: \(directory)/certs/server.key }") }
                \(security)
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let log = directory + "/registry.log"
            unlink(log)
            let pid = try Spawn.start("/usr/bin/docker-registry", ["serve", config], stderrPath: log, stdoutPath: log)
            let registry = Registry(directory: directory, port: port, pid: pid)
            if try registry.waitUntilListening() { return registry }
            lastLog = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        }
        throw TestFailure("the registry did not start: \(lastLog.suffix(600))")
    }

    /// A CA, a server certificate for 127.0.0.1 signed by it, and an htpasswd file; returns
    /// the config's auth section.
    private static func makeSecurity(_ directory: String) throws -> String {
        let certs = directory + "/certs"
        try Disk.mkdir(certs)
        let script = """
            set -e
            cd "$1"
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca -keyout ca.key -out ca.crt 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out server.csr 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out server.crt 2>/dev/null
            htpasswd -Bbn "$2" "$3" > ../htpasswd
            mkdir ../trust && cp ca.crt ../trust/  # a *.key beside it would be taken for a client key
            """
        let run = try Spawn.run("/bin/sh", ["-c", script, "sh", certs, user, password])
        guard run.status == 0 else { throw TestFailure("making the test CA: \(run.error)") }
        return "auth: { htpasswd: { realm: test, path: \(directory)/htpasswd } }"
    }

    /// An auth file (containers-auth.json) with the registry's user and password.
    func authFile(at path: String) throws {
        let token = Data("\(Registry.user):\(Registry.password)".utf8).base64EncodedString()
        try #"{"auths":{"\#(host)":{"auth":"\#(token)"}}}"#.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// True once the port accepts connections; false if the registry exited first.
    private func waitUntilListening(seconds: Double = 20) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if Spawn.exited(pid) != nil { pid = 0; return false }
            if Registry.connects(port) { return true }
            usleep(20_000)
        }
        stop()
        throw TestFailure("the registry did not listen on \(port) within \(seconds) s")
    }

    func stop() {
        guard pid > 0 else { return }
        Spawn.terminate(pid)
        pid = 0
    }

    /// The digests of the blobs fetched (GET .../blobs/sha256:HEX), in order, from its access log.
    func blobFetches() -> [String] {
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return log.split(separator: "\n").compactMap { line in
            guard line.contains("\"GET /v2/"), let range = line.range(of: "/blobs/sha256:") else { return nil }
            return "sha256:" + line[range.upperBound...].prefix(64)
        }
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestFailure("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func connects(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
