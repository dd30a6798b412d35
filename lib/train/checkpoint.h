// What training adds to checkpoint files (lib/io/checkpoint_file.h): the torch RNG state that exact resume
// restores. Naming and finding a run's checkpoint-<step>.cabert files is lib/io/checkpoint_lookup.h.
#pragma once

#include <string>

#include "lib/io/checkpoint_file.h"

namespace cabert::train {

// The torch CPU generator state (raw bytes).
std::string torch_cpu_rng_state();
void set_torch_cpu_rng_state(const std::string& state);

}  // namespace cabert::train
