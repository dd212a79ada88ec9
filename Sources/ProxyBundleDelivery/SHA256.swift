import CCrypto

/// SHA-256, fed in pieces: the digests that name OCI blobs and layers. Computed by the
/// system's libcrypto (OpenSSL's EVP digests, with the processor's SHA instructions where it
/// has them), linked as Debian links it, so its security updates reach the daemon. A value,
/// as the rest of the delivery code expects: a copy hashes on from where it was taken.
public struct SHA256 {
    /// One digest context of libcrypto's, freed with its last holder.
    private final class Context {
        let pointer: OpaquePointer

        /// libcrypto's SHA-256, fetched once (the EVP_sha256() of each init would look it up
        /// by name every time).
        nonisolated(unsafe) private static let digest: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

        init() {
            guard let digest = Context.digest, let pointer = EVP_MD_CTX_new(), EVP_DigestInit_ex(pointer, digest, nil) == 1 else {
                Context.fail("set up")
            }
            self.pointer = pointer
        }

        init(copying other: Context) {
            guard let pointer = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(pointer, other.pointer) == 1 else { Context.fail("copy") }
            self.pointer = pointer
        }

        deinit { EVP_MD_CTX_free(pointer) }

        /// libcrypto fails here only without memory, or with its configuration broken (a
        /// provider that does not load): nothing the caller could do about it.
        static func fail(_ what: String) -> Never {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(ERR_get_error(), &text, text.count)
            fatalError("libcrypto cannot \(what) a SHA-256 digest: \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
    }

    private var context = Context()

    public init() {}

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        guard bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context.pointer, bytes.baseAddress, bytes.count) == 1 else { Context.fail("update") }
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest as lowercase hex (the hash is finished; feed no more).
    public mutating func hex() -> String {
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context.pointer, &digest, &length) == 1, length == 32 else { Context.fail("finish") }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] }, as: UTF8.self)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        var hash = SHA256()
        hash.update(bytes)
        return hash.hex()
    }
}
