#if canImport(Glibc)
import Glibc
#endif

/// The registry client: every registry is reached through skopeo, so the auth files,
/// registries.conf mirrors, policy.json signature rules and TLS settings container users keep
/// apply unchanged.
public struct Skopeo: Sendable {
    /// false: plain HTTP or an unverified certificate (skopeo's --*-tls-verify=false).
    public var tlsVerify = true
    /// A containers-policy.json (skopeo --policy).
    public var policy: String?
    /// Credentials (skopeo --authfile; REGISTRY_AUTH_FILE otherwise).
    public var authfile: String?
    /// A directory of CA certificates (`*.crt`) and client keys for the registry (skopeo
    /// --*-cert-dir; /etc/containers/certs.d/HOST:PORT otherwise).
    public var certDirectory: String?
    /// skopeo's progress lines go to standard error (a terminal).
    public var showProgress = false
    /// The registries.d directory that names each registry's signature store (skopeo
    /// --registries.d; $HOME/.config/containers/registries.d or /etc/containers/registries.d).
    public var registriesDirectory: String?
    /// A push signs the image with this GPG key (skopeo --sign-by: a fingerprint or key ID of
    /// the keyring in GNUPGHOME); the signature goes to the registry's lookaside-staging.
    public var signBy: String?

    public init() {}

    /// `REF` as skopeo names it: a registry reference unless it names a transport.
    public static func source(_ reference: String) -> String {
        let transports = ["docker://", "oci:", "oci-archive:", "docker-archive:", "dir:", "containers-storage:"]
        return transports.contains { reference.hasPrefix($0) } ? reference : "docker://" + reference
    }

    /// skopeo copy SOURCE DESTINATION; a failure is one line naming the source, and an image
    /// the policy refuses one line saying why. A pull keeps no signature in the layout (it
    /// cannot hold one): with `signatureLocations`, skopeo's debug log tells where it read the
    /// signatures it verified (`GET URL/signature-N`, `Reading PATH`), and they are returned,
    /// in the order read, the last one (absent: where its search stopped) left out.
    @discardableResult
    public func copy(from source: String, to destination: String, pushing: Bool = false,
                     signatureLocations: Bool = false) throws -> [String] {
        var arguments: [String] = signatureLocations ? ["--debug"] : []
        if let policy { arguments += ["--policy", policy] }
        if let registriesDirectory { arguments += ["--registries.d", registriesDirectory] }
        arguments += ["copy"]
        if !showProgress { arguments.append("--quiet") }
        if pushing, let signBy { arguments += ["--sign-by", signBy] }
        if !pushing { arguments.append("--remove-signatures") }
        let side = pushing ? "dest" : "src"
        if !tlsVerify { arguments.append("--\(side)-tls-verify=false") }
        if let authfile { arguments += ["--\(side)-authfile", authfile] }
        if let certDirectory { arguments += ["--\(side)-cert-dir", certDirectory] }
        arguments += [source, destination]
        let child = try ChildProcess("skopeo", arguments, outputTo: showProgress ? 2 : -1)
        let (status, lines) = child.waitForLines(keep: signatureLocations ? 1 << 24 : 65536)  // its debug log, signatures first
        let message = Skopeo.message(lines.last ?? "")
        guard status == 0 else {
            if let policy, let reason = Trust.reason(skopeo: message) {
                throw DeliveryError("refused by the policy \(policy): \(reason)")
            }
            throw DeliveryError("skopeo could not copy \(pushing ? destination : source): \(message)")
        }
        guard signatureLocations else { return [] }
        var locations: [String] = []
        for line in lines {
            let text = Skopeo.message(line)
            for verb in ["GET ", "Reading "] where text.hasPrefix(verb) && Signatures.number(text) != nil {
                let location = String(text.dropFirst(verb.count))
                if !locations.contains(location) { locations.append(location) }
            }
        }
        return Array(locations.dropLast())
    }

    /// The sha256 digest of the manifest `source` names in its registry, as it is there
    /// (skopeo inspect --raw: the manifest only, nothing written).
    public func manifestDigest(_ source: String) throws -> String {
        var arguments: [String] = []
        if let registriesDirectory { arguments += ["--registries.d", registriesDirectory] }
        arguments += ["inspect", "--raw"]
        if !tlsVerify { arguments.append("--tls-verify=false") }
        if let authfile { arguments += ["--authfile", authfile] }
        if let certDirectory { arguments += ["--cert-dir", certDirectory] }
        let child = try ChildProcess("skopeo", arguments + [source], captureOutput: true)
        let (status, manifest, lines) = child.collect(outputLimit: 4 << 20)
        guard status == 0, let manifest else {
            throw DeliveryError("skopeo could not inspect \(source): \(Skopeo.message(lines.last ?? ""))")
        }
        return "sha256:" + SHA256.hex(manifest)
    }

    /// The `msg="..."` of skopeo's log line, or the line.
    static func message(_ line: String) -> String {
        let bytes = Array(line.utf8), marker = Array("msg=\"".utf8)
        guard let start = (0..<max(0, bytes.count - marker.count + 1)).first(where: { bytes[$0..<$0 + marker.count].elementsEqual(marker) })
        else { return line.isEmpty ? "it failed without a message" : line }
        var text = Array(bytes[(start + marker.count)...])
        if text.last == UInt8(ascii: "\"") { text.removeLast() }
        var out: [UInt8] = []
        var escaped = false
        for byte in text {
            if byte == UInt8(ascii: "\\") && !escaped { escaped = true; continue }
            escaped = false
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
