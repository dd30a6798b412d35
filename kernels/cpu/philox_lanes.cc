// Philox4x32-10 words in vector lanes (kernels/cpu/philox_lanes.h). Each round multiplies two of the four
// counter words by a constant and needs both halves of the 64-bit products. Written as plain 64-bit products of
// zero-extended words, GCC 12 turns the lanes into vpmullq (a 64 x 64-bit product, three micro-ops and about
// 15 cycles of latency on Intel cores) instead of vpmuludq, the 32 x 32 -> 64-bit product of the even lanes
// (one micro-op): the AVX-512 path spells the products out. Measured on an Intel Xeon (AMX generation, 2 cores)
// for the attention kernel's rows of 128 blocks: 2.3-2.4 ns per word in the portable lanes, 0.68-0.73 here.
#include "kernels/cpu/philox_lanes.h"

#include <algorithm>
#include <cstring>

#include "kernels/philox.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace cabert::kernels::cpu {

void philox_words_portable(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words) {
  using philox::kMul0, philox::kMul1, philox::kWeyl0, philox::kWeyl1;
  constexpr int64_t L = 16;
  for (int64_t start = 0; start < count; start += L) {
    uint32_t c0[L], c1[L], c2[L], c3[L];
    for (int64_t l = 0; l < L; ++l) {
      const uint64_t block = first_block + static_cast<uint64_t>(start + l);
      c0[l] = static_cast<uint32_t>(block);
      c1[l] = static_cast<uint32_t>(block >> 32);
      c2[l] = static_cast<uint32_t>(offset);
      c3[l] = static_cast<uint32_t>(offset >> 32);
    }
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < philox::kRounds; ++round) {
#pragma omp simd
      for (int64_t l = 0; l < L; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0[l], p1 = static_cast<uint64_t>(kMul1) * c2[l];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c0[l] = n0;
        c1[l] = static_cast<uint32_t>(p1);
        c2[l] = n2;
        c3[l] = static_cast<uint32_t>(p0);
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const int64_t n = std::min(L, count - start);
    uint32_t* out = words + 4 * start;
    for (int64_t l = 0; l < n; ++l) {
      out[4 * l] = c0[l];
      out[4 * l + 1] = c1[l];
      out[4 * l + 2] = c2[l];
      out[4 * l + 3] = c3[l];
    }
  }
}

#if defined(__AVX512F__)
// GCC 12 says the intrinsics' own undefined pass-through operands (_mm512_undefined_epi32) "may be used
// uninitialized" where they are inlined: a false positive, silenced for this path only (clang has no such
// warning).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

// The four counter words of sixteen consecutive blocks, one vector each.
struct Lanes {
  __m512i c0, c1, c2, c3;
};

__m512i broadcast(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }

// Blocks first .. first + 15: the low counter word plus the lane, carried into the high word where it wraps.
Lanes counters(uint64_t first, uint64_t offset) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i low = broadcast(static_cast<uint32_t>(first)), high = broadcast(static_cast<uint32_t>(first >> 32));
  Lanes x;
  x.c0 = _mm512_add_epi32(low, lane);
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(x.c0, low);
  x.c1 = _mm512_mask_add_epi32(high, wrapped, high, broadcast(1));
  x.c2 = broadcast(static_cast<uint32_t>(offset));
  x.c3 = broadcast(static_cast<uint32_t>(offset >> 32));
  return x;
}

// Both 32-bit halves of a * m per lane: vpmuludq on the even lanes, and on the odd ones shifted down.
void multiply(__m512i a, __m512i m, __m512i& high, __m512i& low) {
  const __m512i even = _mm512_mul_epu32(a, m), odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  constexpr __mmask16 kOddLanes = 0xAAAA;
  low = _mm512_mask_blend_epi32(kOddLanes, even, _mm512_slli_epi64(odd, 32));
  high = _mm512_mask_blend_epi32(kOddLanes, _mm512_srli_epi64(even, 32), odd);
}

// One Philox round (philox::philox4x32_10): c0 = hi(M1 c2) ^ c1 ^ k0, c1 = lo(M1 c2), c2 = hi(M0 c0) ^ c3 ^ k1,
// c3 = lo(M0 c0). 0x96: the three-way exclusive or.
void philox_round(Lanes& x, __m512i m0, __m512i m1, __m512i k0, __m512i k1) {
  __m512i high0, low0, high1, low1;
  multiply(x.c0, m0, high0, low0);
  multiply(x.c2, m1, high1, low1);
  x.c0 = _mm512_ternarylogic_epi32(high1, x.c1, k0, 0x96);
  x.c2 = _mm512_ternarylogic_epi32(high0, x.c3, k1, 0x96);
  x.c1 = low1;
  x.c3 = low0;
}

// The first n (<= 16) blocks' words in block order, words[4 b + w]: a 4 x 16 transpose (words within 128-bit
// quarters, then the quarters).
void store(const Lanes& x, int64_t n, uint32_t* words) {
  const __m512i t0 = _mm512_unpacklo_epi32(x.c0, x.c1), t1 = _mm512_unpackhi_epi32(x.c0, x.c1);
  const __m512i t2 = _mm512_unpacklo_epi32(x.c2, x.c3), t3 = _mm512_unpackhi_epi32(x.c2, x.c3);
  // u_q holds blocks 4 k + q (k = the quarter), each as its four words.
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  alignas(64) uint32_t partial[64];
  uint32_t* out = n == 16 ? words : partial;
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));       // blocks 0-3
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // 4-7
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));  // 8-11
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // 12-15
  if (n < 16) std::memcpy(words, partial, static_cast<size_t>(4 * n) * sizeof(uint32_t));
}

}  // namespace

// Two groups of sixteen blocks per pass, so that one group's products overlap the other's (a round's chain is
// about ten cycles long): 0.85 against 0.95 ns per word with one group.
void philox_words(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words) {
  const __m512i m0 = broadcast(philox::kMul0), m1 = broadcast(philox::kMul1);
  for (int64_t start = 0; start < count; start += 32) {
    Lanes a = counters(first_block + static_cast<uint64_t>(start), offset);
    Lanes b = counters(first_block + static_cast<uint64_t>(start) + 16, offset);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int r = 0; r < philox::kRounds; ++r) {
      const __m512i key0 = broadcast(k0), key1 = broadcast(k1);
      philox_round(a, m0, m1, key0, key1);
      philox_round(b, m0, m1, key0, key1);
      k0 += philox::kWeyl0;
      k1 += philox::kWeyl1;
    }
    store(a, std::min<int64_t>(16, count - start), words + 4 * start);
    if (count - start > 16) store(b, std::min<int64_t>(16, count - start - 16), words + 4 * (start + 16));
  }
}
#pragma GCC diagnostic pop

#else

void philox_words(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words) {
  philox_words_portable(seed, offset, first_block, count, words);
}

#endif

}  // namespace cabert::kernels::cpu
