import Foundation

/// GPG keys made for one test (ed25519, no passphrase: fast, and no prompt) in a keyring of
/// their own: a GNUPGHOME under /tmp (short: gpg-agent's socket path must fit a sockaddr),
/// each key's public half exported beside it for a policy's keyPath. `remove()` stops the
/// gpg-agent that key generation and signing start, and removes the keyring.
final class SigningKeys {
    let home: String
    private(set) var fingerprints: [String: String] = [:]

    init() throws {
        var template = Array("/tmp/pb-gpg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TestFailure("mkdtemp: \(errno)") }
        home = String(cString: made)
    }

    var environment: [String] { ["GNUPGHOME=\(home)"] }

    /// Makes the key `name`; returns its fingerprint. Its public key is `publicKey(name)`.
    @discardableResult
    func make(_ name: String) throws -> String {
        let made = try Spawn.run("/usr/bin/gpg", ["--batch", "--passphrase", "", "--quick-gen-key", "\(name) <\(name)@proxybundle.invalid>",
                                                  "ed25519", "sign", "never"], environment: environment)
        guard made.status == 0 else { throw TestFailure("gpg --quick-gen-key: \(made.error)") }
        let listed = try Spawn.run("/usr/bin/gpg", ["--batch", "--with-colons", "--list-keys", "\(name)@proxybundle.invalid"],
                                   environment: environment)
        guard let line = listed.output.split(separator: "\n").first(where: { $0.hasPrefix("fpr:") }),
              let fingerprint = line.split(separator: ":", omittingEmptySubsequences: false).dropFirst(9).first else {
            throw TestFailure("no fingerprint for \(name): \(listed.output) \(listed.error)")
        }
        let exported = try Spawn.run("/bin/sh", ["-c", "gpg --batch --export \"$1\" > \"$2\"", "sh", String(fingerprint), publicKey(name)],
                                     environment: environment)
        guard exported.status == 0 else { throw TestFailure("gpg --export: \(exported.error)") }
        fingerprints[name] = String(fingerprint)
        return String(fingerprint)
    }

    func publicKey(_ name: String) -> String { home + "/\(name).gpg" }

    func remove() {
        _ = try? Spawn.run("/usr/bin/gpgconf", ["--kill", "all"], environment: environment)
        try? FileManager.default.removeItem(atPath: home)
    }
}
