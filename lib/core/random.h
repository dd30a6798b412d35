// Random numbers whose values and saved states are the same on every standard library: the raw output of
// std::mt19937_64 (whose sequence the standard fixes), never std::*_distribution (implementation-defined).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cabert {

// Uniform double in [0, 1) from 53 random bits (same on every standard library).
double uniform01(std::mt19937_64& rng);

std::string rng_state(const std::mt19937_64& rng);
// The textual state (operator<<), saved in checkpoints; set_rng_state throws DataError when unreadable.
void set_rng_state(std::mt19937_64& rng, const std::string& state);

// A well-mixed 64-bit seed from two values (SplitMix64's finaliser over a ^ golden-ratio-rotated b).
uint64_t mix_seed(uint64_t a, uint64_t b);

// The generator each row of a batch draws from: one shared generator for every row (its draws depend on
// the batch), or one per row seeded from the row's own seed (an example's draws depend on the example
// alone, whichever data-parallel rank or batch holds it).
class RowRandom {
 public:
  explicit RowRandom(std::mt19937_64& shared) : shared_(&shared) {}
  explicit RowRandom(const std::vector<uint64_t>& row_seeds);
  std::mt19937_64& row(int64_t index);

 private:
  std::mt19937_64* shared_ = nullptr;
  std::vector<std::mt19937_64> rows_;
};

}  // namespace cabert
