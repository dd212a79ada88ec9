#if canImport(Glibc)
import Glibc
#endif

/// A policy applied to the signatures a store keeps beside an image, without the registry:
/// what `--rollback` and a mount of an image from the store check before they switch. The
/// requirements are those skopeo applies when it copies (`Policy.requirements`); each
/// signature is checked by `gpgv` against the requirement's key files, then its claim against
/// the manifest digest and the reference (`signedIdentity`).
public struct Trust: Sendable {
    public let policy: Policy

    public init(policy: Policy) { self.policy = policy }

    /// Why an image is refused, in a few words.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Whether any requirement for `source` asks for a signature.
    public func demandsSignatures(_ source: String) -> Bool {
        policy.requirements(for: source).contains { $0["type"]?.string == "signedBy" }
    }

    /// Checks the image `source` (as skopeo names it) whose manifest has `digest`, with the
    /// signature files `signatures`. Returns the key that verified it for each requirement
    /// that asks for one (none: the policy accepts it without a signature).
    public func check(_ source: String, digest: String, signatures: [String]) throws(Refusal) -> [String] {
        let requirements = policy.requirements(for: source)
        if requirements.isEmpty { throw Refusal("the policy \(policy.path) lists no requirement for it") }
        var signers: [String] = []
        for requirement in requirements {
            switch requirement["type"]?.string {
            case "insecureAcceptAnything": continue
            case "reject": throw Refusal("the policy rejects it")
            case "signedBy": signers.append(try signedBy(requirement, source: source, digest: digest, signatures: signatures))
            case let other:
                throw Refusal("the policy asks for \(other.map { "\"\($0)\"" } ?? "a requirement without a type"), which "
                                  + "proxybundle cannot check (signedBy with GPG keys, insecureAcceptAnything and reject)")
            }
        }
        return signers
    }

    /// skopeo's refusal (`Source image rejected: ...`) in the words `check` uses; nil for any
    /// other failure, and for a rejection it does not know.
    static func reason(skopeo message: String) -> String? {
        let prefix = "Source image rejected: "
        guard message.hasPrefix(prefix) else { return nil }
        let text = String(message.dropFirst(prefix.count))
        if text.contains("no signature exists") { return "it is not signed" }
        if text.hasPrefix("Invalid GPG signature") || text.hasPrefix("Signature by key") {
            let fingerprint = text.split(separator: "\"").dropFirst().first { $0.count == 40 && $0.allSatisfy(\.isHexDigit) }
                ?? text.split(separator: " ").dropFirst(3).first { $0.count >= 16 && $0.allSatisfy(\.isHexDigit) }
            return "it is signed by \(fingerprint.map { $0 + ", " } ?? "")a key the policy does not trust"
        }
        let identity = "Signature for identity ", notAccepted = " is not accepted"
        if text.hasPrefix(identity) && text.hasSuffix(notAccepted) {
            return "its signature is for another reference, " + text.dropFirst(identity.count).dropLast(notAccepted.count)
        }
        if text.hasPrefix("Signature for digest ") { return "its manifest changed after it was signed" }
        if text.contains("parsing signature") || text.contains("signature format") { return "its signature does not parse" }
        if text.contains("is rejected by policy") { return "the policy rejects it" }
        return nil  // a signature store that cannot be reached, say: skopeo's own words
    }

    /// The refusals, from the least to the most telling: the one said is the most telling of all
    /// the signatures' (a signature by the right key for another reference says more than one
    /// by an unknown key).
    private enum Reason: Int {
        case unsigned, unparsable, otherKey, bad, changed, identity
    }

    private func signedBy(_ requirement: JSON, source: String, digest: String, signatures: [String]) throws(Refusal) -> String {
        guard requirement["keyType"]?.string == "GPGKeys" else {
            throw Refusal("the policy's keyType \(requirement["keyType"]?.string ?? "(none)") is not one proxybundle checks (GPGKeys)")
        }
        let keys = try KeyFiles(requirement)
        defer { keys.remove() }
        var worst = (Reason.unsigned, "it is not signed")
        func note(_ reason: Reason, _ text: String) { if reason.rawValue > worst.0.rawValue { worst = (reason, text) } }
        for file in signatures {
            let checked: Signature.Check
            do { checked = try Signature.check(file, keyrings: keys.keyrings) } catch { throw Refusal("its signature cannot be checked: \(error)") }
            switch checked {
            case .valid(let fingerprint, let payload):
                guard let claim = Signature.claim(payload) else { note(.unparsable, "its signature does not parse"); continue }
                guard claim.manifestDigest == digest else { note(.changed, "its manifest changed after it was signed"); continue }
                guard Trust.identityMatches(requirement["signedIdentity"], source: source, signed: claim.reference) else {
                    note(.identity, "its signature is for another reference, \(claim.reference)")
                    continue
                }
                return keys.name(fingerprint)
            case .otherKey(let fingerprint):
                note(.otherKey, "it is signed by \(fingerprint.map { $0 + ", " } ?? "")a key the policy does not trust")
            case .bad: note(.bad, "its signature does not match what it signs")
            case .unparsable: note(.unparsable, "its signature does not parse")
            }
        }
        throw Refusal(worst.1)
    }

    /// Whether a signature for the reference `signed` stands for the image `source`, by the
    /// requirement's `signedIdentity` (containers-policy.json(5); `matchRepoDigestOrExact` when
    /// absent). An image from another transport than docker has no reference: only the rules
    /// that name one can match.
    static func identityMatches(_ rule: JSON?, source: String, signed text: String) -> Bool {
        let (transport, rest) = Policy.split(source)
        let image = transport == "docker" ? DockerReference.image(rest) : nil
        guard let signed = DockerReference(text) else { return false }
        switch rule?["type"]?.string ?? "matchRepoDigestOrExact" {
        case "matchRepoDigestOrExact": return image.map { matchRepoDigestOrExact($0, signed) } ?? false
        case "matchRepository": return image?.name == signed.name
        case "matchExact": return image.map { !$0.isNameOnly && !signed.isNameOnly && $0 == signed } ?? false
        case "exactReference":
            guard let named = rule?["dockerReference"]?.string.flatMap(DockerReference.init), !named.isNameOnly else { return false }
            return !signed.isNameOnly && named == signed
        case "exactRepository":
            return rule?["dockerRepository"]?.string.flatMap(DockerReference.init)?.name == signed.name
        case "remapIdentity":
            guard let image, let prefix = rule?["prefix"]?.string, let replacement = rule?["signedPrefix"]?.string,
                  image.name == prefix || image.name.hasPrefix(prefix + "/") || (prefix.hasSuffix("/") && image.name.hasPrefix(prefix)),
                  let remapped = DockerReference(replacement + image.text.dropFirst(prefix.count)) else {
                return image.map { matchRepoDigestOrExact($0, signed) } ?? false
            }
            return matchRepoDigestOrExact(remapped, signed)
        default: return false
        }
    }

    /// A tagged image: the signature names that very tag; an image by digest: the same repository
    /// (the digest itself is checked against the signature's).
    private static func matchRepoDigestOrExact(_ image: DockerReference, _ signed: DockerReference) -> Bool {
        if image.tag != nil { return signed == image }
        if image.digest != nil { return signed.name == image.name }
        return false
    }
}
