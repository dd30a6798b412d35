#include "lib/core/random.h"

#include <sstream>

#include "lib/core/errors.h"

namespace cabert {

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void set_rng_state(std::mt19937_64& rng, const std::string& state) {
  std::istringstream in(state);
  in >> rng;
  if (!in) throw DataError("checkpoint: cannot parse the saved random-number-generator state");
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

RowRandom::RowRandom(const std::vector<uint64_t>& row_seeds) {
  rows_.reserve(row_seeds.size());
  for (uint64_t seed : row_seeds) rows_.emplace_back(seed);
}

std::mt19937_64& RowRandom::row(int64_t index) {
  if (shared_ != nullptr) return *shared_;
  if (index < 0 || static_cast<size_t>(index) >= rows_.size()) {
    throw Error(str("internal: RowRandom has ", rows_.size(), " row seeds, row ", index, " was asked for"));
  }
  return rows_[static_cast<size_t>(index)];
}

}  // namespace cabert
