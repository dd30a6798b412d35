// Philox4x32-10 for runs of consecutive counter blocks, many at a time in vector lanes. kernels/philox.h holds
// the one-block form every device and the reference share; these compute exactly the same words
// (tests/kernels/attention_fused_test.cc compares them), only faster: the scalar form, one block per four
// draws, cost the CPU attention kernel about as much as its matrix products when dropout was on.
#pragma once

#include <cstdint>

namespace cabert::kernels::cpu {

// words[4 b + w] = word w of counter block first_block + b, for b < count (key = seed, counter high half =
// offset, as philox::block). Compiled with the CPU kernels' flags (kernels/cpu/philox_lanes.cc): with AVX-512,
// thirty-two blocks at a time in explicit 32 x 32 -> 64-bit products; otherwise philox_words_portable.
void philox_words(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words);

// The same words from sixteen structure-of-arrays lanes the compiler vectorises as it can; what philox_words
// runs without AVX-512 (kept callable so that the tests check it on every machine).
void philox_words_portable(uint64_t seed, uint64_t offset, uint64_t first_block, int64_t count, uint32_t* words);

}  // namespace cabert::kernels::cpu
