/// A registry reference as the containers tools read it, with what policy scopes and signature
/// identities need: `host[:port]/path[:tag][@digest]`, Docker Hub's `docker.io` and
/// `library/` filled in for short names (`busybox` is `docker.io/library/busybox`).
public struct DockerReference: Equatable, Sendable {
    /// `host/path`, without tag or digest.
    public let name: String
    public let tag: String?
    public let digest: String?

    public init?(_ text: String) {
        var rest = Substring(text)
        var digest: String?
        if let at = rest.lastIndex(of: "@") {
            digest = String(rest[rest.index(after: at)...])
            rest = rest[..<at]
        }
        var tag: String?
        if let colon = rest.lastIndex(of: ":"), !rest[colon...].contains("/") {
            tag = String(rest[rest.index(after: colon)...])
            rest = rest[..<colon]
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard !rest.isEmpty, !parts.contains(where: \.isEmpty), tag?.isEmpty != true,
              digest.map({ ImageLayout.hex(of: $0) != nil }) ?? true,
              !rest.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" }) else { return nil }
        let first = parts[0]
        let hasHost = parts.count > 1 && (first.contains(".") || first.contains(":") || first == "localhost")
        var name = String(rest)
        if !hasHost { name = "docker.io/" + (parts.count == 1 ? "library/" : "") + name }
        if name.hasPrefix("docker.io/") && name.split(separator: "/").count == 2 {
            name = "docker.io/library/" + name.dropFirst("docker.io/".count)
        }
        self.name = name
        self.tag = tag
        self.digest = digest
    }

    /// An image as the docker transport names it: a reference without tag or digest means `:latest`.
    public static func image(_ text: String) -> DockerReference? {
        guard let reference = DockerReference(text) else { return nil }
        if reference.tag == nil && reference.digest == nil { return DockerReference(reference.name + ":latest") }
        return reference
    }

    public var isNameOnly: Bool { tag == nil && digest == nil }

    /// `name[:tag][@digest]`
    public var text: String { name + (tag.map { ":" + $0 } ?? "") + (digest.map { "@" + $0 } ?? "") }

    /// The policy scopes that may hold this image's requirements, most specific first: the
    /// reference itself, its repository, each namespace above it up to the host, then
    /// `*.domain` wildcards of the host (as containers/image looks them up).
    public var scopes: [String] {
        var scopes = [text]
        var name = Substring(self.name)
        while true {
            scopes.append(String(name))
            guard let slash = name.lastIndex(of: "/") else { break }
            name = name[..<slash]
        }
        if let colon = name.firstIndex(of: ":") { name = name[..<colon] }
        while let dot = name.firstIndex(of: ".") {
            name = name[name.index(after: dot)...]
            scopes.append("*." + name)
        }
        return scopes
    }
}
