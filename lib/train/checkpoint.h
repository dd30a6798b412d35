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

// A checkpoint argument as a user types it (`--model`, `--init`): a file is itself; a model directory stands
// for its best.cabert (a fine-tuning run) or else its newest checkpoint-<step>.cabert whose header reads back
// (a pre-training run; broken newer ones are skipped with a warning), and the choice is logged. A directory
// with neither is a UsageError naming `flag`; a path that does not exist is returned for the reader to report.
std::string resolve_checkpoint_argument(const std::string& path, const std::string& flag);

}  // namespace cabert::train
