// Random numbers whose values and saved states are the same on every standard library: the raw output of
// std::mt19937_64 (whose sequence the standard fixes), never std::*_distribution (implementation-defined).
#pragma once

#include <random>
#include <string>

namespace cabert {

// Uniform double in [0, 1) from 53 random bits (same on every standard library).
double uniform01(std::mt19937_64& rng);

std::string rng_state(const std::mt19937_64& rng);
// The textual state (operator<<), saved in checkpoints; set_rng_state throws DataError when unreadable.
void set_rng_state(std::mt19937_64& rng, const std::string& state);

}  // namespace cabert
