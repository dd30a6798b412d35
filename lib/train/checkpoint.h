// What training adds to checkpoint files (lib/io/checkpoint_file.h): the checkpoints of a run in its model
// directory (checkpoint-<step>.cabert, keep the last K) and the torch RNG state that exact resume restores.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/io/checkpoint_file.h"

namespace cabert::train {

// The torch CPU generator state (raw bytes).
std::string torch_cpu_rng_state();
void set_torch_cpu_rng_state(const std::string& state);

// Checkpoint files in `dir` named checkpoint-<step>.cabert, sorted by step.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);
std::string checkpoint_path(const std::string& dir, int64_t step);

}  // namespace cabert::train
