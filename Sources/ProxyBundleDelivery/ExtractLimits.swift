/// What an untrusted layer may hold, and what extraction may keep of it.
public struct ExtractLimits: Sendable {
    /// Bytes of the uncompressed tar stream (a decompression bomb stops here).
    public var maxBytes: UInt64 = 16 << 30
    /// Entries of the archive.
    public var maxEntries = 1_000_000
    /// Keep device nodes, FIFOs and set-user/group-ID bits (honoured only as root).
    public var allowSpecial = false

    public init() {}

    public static let maxPath = 4095
    public static let maxName = 255
}
