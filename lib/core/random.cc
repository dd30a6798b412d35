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
}  // namespace cabert
