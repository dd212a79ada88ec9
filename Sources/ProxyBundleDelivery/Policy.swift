#if canImport(Glibc)
import Glibc
#endif

/// A containers-policy.json: which images are trusted, per transport and reference prefix.
/// skopeo applies it when it copies an image (before any blob is written); `Trust` applies it
/// again to the signatures a store keeps, for a switch made without the registry.
public struct Policy: Sendable {
    public let path: String
    let json: JSON

    /// The policy a store's commands use: `given` (--policy), else `STORE/policy.json`, else
    /// the one skopeo would take itself ($HOME/.config/containers/policy.json, then
    /// /etc/containers/policy.json). The path is always passed to skopeo, so both read one file.
    public static func path(given: String?, store: Store) -> String {
        if let given { return given }
        var candidates = [store.root + "/policy.json"]
        if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty {
            candidates.append(home + "/.config/containers/policy.json")
        }
        candidates.append("/etc/containers/policy.json")
        return candidates.first { access($0, F_OK) == 0 } ?? candidates[candidates.count - 1]
    }

    public init(path: String) throws {
        self.path = path
        let bytes: [UInt8]
        do { bytes = try ImageLayout.read(path, limit: 1 << 20) } catch {
            throw DeliveryError("cannot read the policy \(path): \(error)")
        }
        do { json = try JSON.parse(bytes) } catch { throw DeliveryError("the policy \(path) is \(error)") }
        guard json["default"]?.array != nil else {
            throw DeliveryError("the policy \(path) has no \"default\" list of requirements")
        }
    }

    /// The requirements for an image given as skopeo names it (`docker://REF`, `oci:DIR:TAG`):
    /// those of the most specific scope of its transport that has any, else `default`.
    public func requirements(for source: String) -> [JSON] {
        let (transport, rest) = Policy.split(source)
        let scopes: [String]
        if transport == "docker", let reference = DockerReference.image(rest) {
            scopes = reference.scopes
        } else {
            // a path-like reference: itself, then each directory above it
            var path = Substring(rest)
            var found = [String(path)]
            if let colon = path.lastIndex(of: ":") { path = path[..<colon]; found.append(String(path)) }
            while let slash = path.lastIndex(of: "/"), slash != path.startIndex {
                path = path[..<slash]
                found.append(String(path))
            }
            scopes = found
        }
        if let section = json["transports"]?[transport] {
            for scope in scopes + [""] { if let list = section[scope]?.array { return list } }
        }
        return json["default"]?.array ?? []
    }

    /// `docker://host/app:v1` → (`docker`, `host/app:v1`); `oci:/dir:tag` → (`oci`, `/dir:tag`).
    static func split(_ source: String) -> (transport: String, rest: String) {
        if source.hasPrefix("docker://") { return ("docker", String(source.dropFirst("docker://".count))) }
        guard let colon = source.firstIndex(of: ":") else { return ("docker", source) }
        return (String(source[..<colon]), String(source[source.index(after: colon)...]))
    }
}
