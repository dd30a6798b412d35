// What training adds to checkpoint files (lib/io/checkpoint_file.h): the torch RNG state that exact resume
// restores, and the header every fine-tuned checkpoint starts from. Naming and finding a run's
// checkpoint-<step>.cabert files is lib/io/checkpoint_lookup.h.
#pragma once

#include <string>

#include "lib/io/checkpoint_file.h"

namespace cabert::text {
class Tokenizer;
}  // namespace cabert::text

namespace cabert::train {

// The torch CPU generator state (raw bytes).
std::string torch_cpu_rng_state();
void set_torch_cpu_rng_state(const std::string& state);

// A fine-tuned checkpoint's header at `update`: kind "finetune", the model config, the tokenizer (absolute path
// and checksum); the task's metadata is the caller's.
pb::CheckpointInfo fine_tuned_info(const pb::ModelConfig& config, const text::Tokenizer& tokenizer, int64_t update);

}  // namespace cabert::train
