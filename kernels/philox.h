// Counter-based random numbers for dropout: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3", SC'11), the generator PyTorch and cuRAND use on CUDA. A number is a pure function of (seed,
// offset, index), so the backward regenerates the forward's dropout mask instead of storing it, every kernel
// (CPU, CUDA, the reference) draws the same mask, and a run is reproducible.
//
// The scheme (kernels/dropout_kernels.h): element e of a tensor (its row-major index; for attention, element
// (b, h, i, j) of the [B, N, T, T] probabilities has index ((b N + h) T + i) T + j); Philox is run with
// key = seed (two 32-bit words) and counter (e / 4 as two words, offset as two words), and word e % 4 of its
// output u is the element's draw; the element is kept when (u >> 8) / 2^24 >= p. The seed comes from the
// default CPU generator once per call (lib/ops/dropout_ops.cc).
#pragma once

#include <cstdint>

#include "kernels/conv_math.h"  // CABERT_HOST_DEVICE

namespace cabert::kernels::philox {

struct Words {
  uint32_t w[4];
};

CABERT_HOST_DEVICE uint32_t mul_hi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

// The round constants of the paper and of Random123: multipliers, and the Weyl increments of the key.
constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u, kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
constexpr int kRounds = 10;

// Philox4x32 with 10 rounds.
CABERT_HOST_DEVICE Words philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < kRounds; ++round) {
    const uint32_t hi0 = mul_hi(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = mul_hi(kMul1, c2), lo1 = kMul1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Words{{c0, c1, c2, c3}};
}

// The four draws of counter block index / 4 (elements 4 * block .. 4 * block + 3).
CABERT_HOST_DEVICE Words block(uint64_t seed, uint64_t offset, uint64_t block_index) {
  return philox4x32_10(static_cast<uint32_t>(block_index), static_cast<uint32_t>(block_index >> 32),
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

// A draw as a uniform number in [0, 1) with 24 bits, exact in float.
CABERT_HOST_DEVICE float uniform(uint32_t word) { return static_cast<float>(word >> 8) * (1.0f / 16777216.0f); }

// Word k (0 .. 3) of a block, selected rather than indexed: on a GPU an array indexed at run time lives in local
// memory, the selected words stay in registers.
CABERT_HOST_DEVICE uint32_t word(const Words& words, uint64_t k) {
  return k == 0 ? words.w[0] : k == 1 ? words.w[1] : k == 2 ? words.w[2] : words.w[3];
}

CABERT_HOST_DEVICE bool keep(uint64_t seed, uint64_t offset, uint64_t index, float p) {
  return uniform(word(block(seed, offset, index >> 2), index & 3)) >= p;
}

// The index runs a kernel walks for a tensor (kernels/dropout_kernels.h, draw_runs): `rows` runs of `length`
// consecutive indices, run a starting at first + a stride.
struct DrawRuns {
  int64_t rows = 0, length = 0;
  uint64_t first = 0, stride = 0;
};

// The walk over the counter blocks the runs meet, one work item per block: item t is block t % blocks_per_run
// of run t / blocks_per_run (a run of L indices meets at most L / 4 + 2 blocks; items past a run's last block
// have none: block * 4 >= stop). Word w of the block goes to element_of(runs, block, w).
struct RunBlock {
  int64_t run;
  uint64_t start, stop, block;
};
CABERT_HOST_DEVICE int64_t blocks_per_run(const DrawRuns& runs) { return runs.length / 4 + 2; }
CABERT_HOST_DEVICE RunBlock run_block(const DrawRuns& runs, int64_t item) {
  const int64_t per_run = blocks_per_run(runs), run = item / per_run;
  const uint64_t start = runs.first + static_cast<uint64_t>(run) * runs.stride;
  return {run, start, start + static_cast<uint64_t>(runs.length), (start >> 2) + static_cast<uint64_t>(item % per_run)};
}
// The tensor element that word w of the item's block is the draw of (index start + e of the run: element
// run * length + e), or -1 where that index lies outside the run.
CABERT_HOST_DEVICE int64_t element_of(const DrawRuns& runs, const RunBlock& b, int w) {
  const uint64_t index = b.block * 4 + static_cast<uint64_t>(w);
  return index >= b.start && index < b.stop ? b.run * runs.length + static_cast<int64_t>(index - b.start) : -1;
}

}  // namespace cabert::kernels::philox
