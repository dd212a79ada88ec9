// SHA-256 blocks with the x86 SHA extensions (sha256rnds2, sha256msg1, sha256msg2): the
// digests of layer blobs and tar streams, hundreds of megabytes a pull, at several times the
// speed of the portable code in ProxyBundleDelivery/SHA256.swift, which runs where these
// instructions are missing (another processor, another architecture).
#include "CSyscalls.h"

// The round constants of FIPS 180-4, for the portable code too.
const uint32_t pb_sha256_round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

// CPUID leaf 7: EBX bit 29 is SHA; leaf 1: ECX bits 9 (SSSE3) and 19 (SSE4.1).
static int has_sha_extensions(void) {
    static int known = -1;
    if (known >= 0) return known;
    unsigned a, b, c, d;
    int sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
    int sse = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 9)) && (c & (1u << 19));
    known = sha && sse;
    return known;
}

// Four rounds: the words `message` plus their constants, two rounds at a time; the state is
// kept as the instructions want it, (a, b, e, f) and (c, d, g, h).
__attribute__((target("sha,sse4.1,ssse3")))
static inline void four_rounds(__m128i *abef, __m128i *cdgh, __m128i message, int group) {
    __m128i words = _mm_add_epi32(message, _mm_loadu_si128((const __m128i *)&pb_sha256_round_constants[group * 4]));
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, words);
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(words, 0x0E));
}

__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_with_sha_extensions(uint32_t state[8], const uint8_t *data, size_t blocks) {
    // state words a..d and e..h, as lanes 0..3: into (f, e, b, a) and (h, g, d, c)
    __m128i low = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);   // b a d c
    __m128i high = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B);  // h g f e
    __m128i abef = _mm_alignr_epi8(low, high, 8);
    __m128i cdgh = _mm_blend_epi16(high, low, 0xF0);
    // each 32-bit word of the message is big-endian
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    for (; blocks > 0; blocks--, data += 64) {
        __m128i saved_abef = abef, saved_cdgh = cdgh;
        __m128i w[4];
        for (int i = 0; i < 4; i++) {
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * i)), byte_swap);
            four_rounds(&abef, &cdgh, w[i], i);
        }
        // W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time, from the last
        // sixteen words (w[0] the oldest four)
        for (int group = 4; group < 16; group++) {
            __m128i next = _mm_add_epi32(_mm_sha256msg1_epu32(w[0], w[1]), _mm_alignr_epi8(w[3], w[2], 4));
            next = _mm_sha256msg2_epu32(next, w[3]);
            w[0] = w[1]; w[1] = w[2]; w[2] = w[3]; w[3] = next;
            four_rounds(&abef, &cdgh, next, group);
        }
        abef = _mm_add_epi32(abef, saved_abef);
        cdgh = _mm_add_epi32(cdgh, saved_cdgh);
    }
    // back to a..d and e..h
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

int pb_sha256_blocks(uint32_t state[8], const void *data, size_t blocks) {
    if (!has_sha_extensions()) return 0;
    blocks_with_sha_extensions(state, data, blocks);
    return 1;
}

#else

int pb_sha256_blocks(uint32_t state[8], const void *data, size_t blocks) {
    (void)state; (void)data; (void)blocks;
    return 0;
}

#endif
