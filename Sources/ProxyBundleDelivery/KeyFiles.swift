#if canImport(Glibc)
import Glibc
#endif

/// The public keys of a `signedBy` requirement as files gpgv reads: its `keyPath`, each of its
/// `keyPaths` (a rotation: any of them verifies), or its `keyData` (base64). gpgv reads binary
/// keyrings only, so an ASCII-armored key (`gpg --export --armor`) is converted by
/// `gpg --dearmor` into a temporary directory, removed with `remove()`.
struct KeyFiles {
    /// The files gpgv is given (`--keyring`).
    private(set) var keyrings: [String] = []
    /// The files as the policy names them, for people.
    private(set) var names: [String] = []
    private var temporary: String?

    init(_ requirement: JSON) throws(Trust.Refusal) {
        let paths = requirement["keyPaths"]?.array?.compactMap(\.string) ?? requirement["keyPath"]?.string.map { [$0] } ?? []
        let data = requirement["keyData"]?.string
        guard paths.isEmpty != (data == nil) else {
            throw Trust.Refusal("its signedBy requirement names no key, or more than one of keyPath, keyPaths and keyData")
        }
        do {
            for path in paths {
                // gpgv takes a name without a slash as one in its home directory
                let file = path.contains("/") ? path : "./" + path
                let bytes = try ImageLayout.read(file, limit: 16 << 20)
                keyrings.append(try armored(bytes) ? dearmor(file) : file)
                names.append(path)
            }
            if let data {
                guard let bytes = KeyFiles.base64(data) else { throw DeliveryError("its keyData is not base64") }
                let file = try directory() + "/key-data"
                try Store.writeAtomically(file, bytes)
                keyrings.append(try armored(bytes) ? dearmor(file) : file)
                names.append("keyData")
            }
        } catch {
            remove()
            throw Trust.Refusal("the policy's key cannot be read: \(error)")
        }
    }

    /// `FINGERPRINT (FILE)` where the requirement has one key file, else the fingerprint.
    func name(_ fingerprint: String) -> String { names.count == 1 ? "\(fingerprint) (\(names[0]))" : fingerprint }

    func remove() {
        if let temporary { try? Tree.remove(path: temporary) }
    }

    private func armored(_ bytes: [UInt8]) -> Bool { bytes.starts(with: Array("-----BEGIN".utf8)) }

    private mutating func directory() throws -> String {
        if let temporary { return temporary }
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/proxybundle-keys-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw DeliveryError("cannot make a temporary directory in \(base)") }
        temporary = String(cString: made)
        return temporary ?? ""
    }

    private mutating func dearmor(_ file: String) throws -> String {
        let directory = try directory()
        let output = directory + "/key-\(keyrings.count).gpg"
        let child = try ChildProcess("gpg", ["--batch", "--no-options", "--homedir", directory, "--dearmor", "--output", output, file])
        let (status, message) = child.wait()
        guard status == 0 else { throw DeliveryError("gpg --dearmor \(file): \(message)") }
        return output
    }

    /// RFC 4648 base64, padding optional, line breaks ignored.
    static func base64(_ text: String) -> [UInt8]? {
        var bits: UInt32 = 0, count = 0
        var out: [UInt8] = []
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            default: return nil
            }
            bits = bits << 6 | UInt32(value)
            count += 6
            if count >= 8 {
                count -= 8
                out.append(UInt8(truncatingIfNeeded: bits >> UInt32(count)))
            }
        }
        return out
    }
}
