// Philox4x32-10 for runs of consecutive counter blocks, sixteen at a time in structure-of-arrays lanes the
// compiler turns into vector code (32 x 32 -> 64-bit products as vpmuludq). kernels/philox.h holds the
// one-block form every device and the reference share; this computes exactly the same words
// (tests/kernels/attention_fused_test.cc compares them), only faster: the scalar form, one block per four
// draws, cost the CPU attention kernel about as much as its matrix products when dropout was on.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/philox.h"

namespace cabert::kernels::cpu {

constexpr int64_t kPhiloxLanes = 16;

// words[4 b + w] = word w of counter block first_block + b, for b < count (key = seed, counter high half =
// offset, as philox::block).
inline void philox_words(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words) {
  using philox::kMul0, philox::kMul1, philox::kWeyl0, philox::kWeyl1;
  constexpr int64_t L = kPhiloxLanes;
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
#if defined(_OPENMP)  // translation units built without -fopenmp (the tests) include this too
#pragma omp simd
#endif
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

}  // namespace cabert::kernels::cpu
