import CSyscalls

/// SHA-256 (FIPS 180-4), fed in pieces: the digests that name OCI blobs and layers.
/// Written here so the delivery code needs no crypto library: whole blocks go to the
/// processor's SHA instructions where it has them (`pb_sha256_blocks`), else to `compress`.
public struct SHA256 {
    private var state: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    /// Only the portable code, never the processor's instructions (to compare the two).
    private let portable: Bool

    public init() { self.init(portable: false) }

    init(portable: Bool) {
        self.portable = portable
        pending.reserveCapacity(64)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var start = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            start = take
            guard pending.count == 64 else { return }
            let block = pending
            block.withUnsafeBytes { compress($0) }
            pending.removeAll(keepingCapacity: true)
        }
        let blocks = (bytes.count - start) / 64
        if blocks > 0, !portable, let base = bytes.baseAddress,
           state.withUnsafeMutableBufferPointer({ pb_sha256_blocks($0.baseAddress, base + start, blocks) }) == 1 {
            start += blocks * 64
        }
        while bytes.count - start >= 64 {
            compress(UnsafeRawBufferPointer(rebasing: bytes[start..<start + 64]))
            start += 64
        }
        pending.append(contentsOf: bytes[start...])
    }

    public mutating func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The digest as lowercase hex (the hash is finished; feed no more).
    public mutating func hex() -> String {
        let bits = length &* 8
        var tail: [UInt8] = [0x80] + [UInt8](repeating: 0, count: Int((119 - length % 64) % 64))
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        update(tail)
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for word in state {
            for shift in stride(from: 28, through: 0, by: -4) { text.append(digits[Int(word >> UInt32(shift) & 0xf)]) }
        }
        return String(decoding: text, as: UTF8.self)
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        var hash = SHA256()
        hash.update(bytes)
        return hash.hex()
    }

    private mutating func compress(_ block: UnsafeRawBufferPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for i in 0..<16 {
                w[i] = UInt32(block[i * 4]) << 24 | UInt32(block[i * 4 + 1]) << 16
                    | UInt32(block[i * 4 + 2]) << 8 | UInt32(block[i * 4 + 3])
            }
            for i in 16..<64 {
                let s0 = rotate(w[i - 15], 7) ^ rotate(w[i - 15], 18) ^ (w[i - 15] >> 3)
                let s1 = rotate(w[i - 2], 17) ^ rotate(w[i - 2], 19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var a = state[0], b = state[1], c = state[2], d = state[3]
            var e = state[4], f = state[5], g = state[6], h = state[7]
            for i in 0..<64 {
                let t1 = h &+ (rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)) &+ ((e & f) ^ (~e & g)) &+ SHA256.k[i] &+ w[i]
                let t2 = (rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
                h = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
            }
            state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
            state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
        }
    }

    @inline(__always) private func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { x >> n | x << (32 - n) }

    private static let k: [UInt32] = withUnsafeBytes(of: pb_sha256_round_constants) { Array($0.bindMemory(to: UInt32.self)) }
}
