#if canImport(Glibc)
import Glibc
#endif

/// A simple-signing signature (containers-signature(5)): an OpenPGP signed message whose
/// content is a small JSON object naming the manifest digest and the reference it is for.
/// `gpgv` checks it against key files; proxybundle only reads the three fields it signs.
struct Signature {
    enum Check {
        /// A good signature by the key `fingerprint` (the primary key's), of `payload`.
        case valid(fingerprint: String, payload: [UInt8])
        /// Made by a key none of the key files hold (its fingerprint when gpgv names it).
        case otherKey(String?)
        /// A signature by a known key that does not match what it signs.
        case bad
        /// Not an OpenPGP signed message.
        case unparsable
    }

    /// Checks the signature in `file` against the keyrings `keyrings` (binary key files).
    static func check(_ file: String, keyrings: [String]) throws -> Check {
        let arguments = keyrings.flatMap { ["--keyring", $0] } + ["--status-fd", "2", "--output", "-", file]
        let child = try ChildProcess("gpgv", arguments, captureOutput: true)
        // gpgv writes the content before it has checked it: it counts only with VALIDSIG
        let (status, payload, lines) = child.collect(outputLimit: 1 << 16)
        var fingerprint: String?, good = false, signer: String?
        for line in lines where line.hasPrefix("[GNUPG:] ") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 2 else { continue }
            switch fields[1] {
            case "GOODSIG": good = true
            case "VALIDSIG" where fields.count >= 3: fingerprint = fields.count >= 12 ? fields[11] : fields[2]
            case "ERRSIG" where fields.count >= 9: signer = fields[8] == "-" ? nil : fields[8]
            case "NO_PUBKEY" where fields.count >= 3: signer = signer ?? fields[2]
            case "BADSIG": return .bad
            default: continue
            }
        }
        if status == 0, good, let fingerprint, let payload { return .valid(fingerprint: fingerprint, payload: payload) }
        if let signer { return .otherKey(signer) }
        return lines.contains { $0.hasPrefix("[GNUPG:] NEWSIG") } ? .otherKey(nil) : .unparsable
    }

    /// The fields of a payload: what it was signed for.
    struct Claim {
        var manifestDigest: String
        var reference: String
    }

    /// The claim of a payload; nil when it is not an atomic container signature.
    static func claim(_ payload: [UInt8]) -> Claim? {
        guard let json = try? JSON.parse(payload), let critical = json["critical"],
              critical["type"]?.string == "atomic container signature",
              let digest = critical["image"]?["docker-manifest-digest"]?.string,
              let reference = critical["identity"]?["docker-reference"]?.string else { return nil }
        return Claim(manifestDigest: digest, reference: reference)
    }
}
