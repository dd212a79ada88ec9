/// The hash of a name's bytes that the daemon's own tables use (`NameSet` while a listing is
/// merged, `SpellingTable` under casefold): one multiply per 8 bytes, seeded per process so
/// that names chosen to collide in one daemon do not collide in another. Swift's `Hasher`
/// spent a third of a merge seeding and finalizing itself.
enum NameHash {
    /// The hash of `bytes`, with A-Z lowered first where `lowering`: a name and the name
    /// lowered hash alike.
    @inline(__always)
    static func hash(_ bytes: UnsafeRawBufferPointer, lowering: Bool) -> UInt64 {
        var h = seed ^ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            h = mix(h ^ (lowering ? lower(word) : word))
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        return mix(h ^ (lowering ? lower(tail) : tail))
    }

    /// `word`, eight bytes, with A-Z lowered: a byte from 0x41 to 0x5A gains 0x20, any other
    /// stays (the sums below never carry from one byte into the next).
    @inline(__always)
    static func lower(_ word: UInt64) -> UInt64 {
        let high: UInt64 = 0x8080_8080_8080_8080
        let low7 = word & ~high
        let atLeastA = low7 &+ 0x3F3F_3F3F_3F3F_3F3F
        let pastZ = low7 &+ 0x2525_2525_2525_2525
        return word | ((atLeastA & ~pastZ & ~word & high) >> 2)
    }

    private static func mix(_ x: UInt64) -> UInt64 {
        var h = x &* 0x9E37_79B9_7F4A_7C15
        h ^= h >> 32
        return (h &* 0xD6E8_FEB8_6659_FD93) ^ (h >> 29)
    }

    private static let seed = UInt64.random(in: 0 ... .max)
}
