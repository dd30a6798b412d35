// Checkpoint files: a cabert record file (type cabert.pb.CheckpointEntry) holding one CheckpointInfo (model
// config, tokenizer path + checksum, step, data position, RNG states, kind, metadata) and then named
// tensors: "model/<name>" for a module's parameters and buffers, "optimizer/<name>" for optimizer state.
// Written atomically (temporary file + rename). Reading refuses, naming the file: a truncated or corrupted
// file (zstd checksums, with the offset), missing tensors (the count it expected), a tensor whose bytes do
// not match its shape (checked before anything is allocated) and a model config that does not validate.
// Used by training (lib/train) and by everything that only reads a model (evaluate, export, bench).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "formats/checkpoint.pb.h"

namespace cabert::io {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct Checkpoint {
  pb::CheckpointInfo info;
  std::map<std::string, torch::Tensor> tensors;  // CPU tensors by full name ("model/encoder....")
  std::string path;
};

// Sets info.tensor_count and writes `path` atomically.
void save_checkpoint(const std::string& path, pb::CheckpointInfo info, const NamedTensors& tensors);
Checkpoint load_checkpoint(const std::string& path);
// The info record alone (what kind of model a file holds), without reading the tensors.
pb::CheckpointInfo read_checkpoint_info(const std::string& path);

// The module's parameters and buffers, named "<prefix><name>".
NamedTensors module_tensors(const torch::nn::Module& module, const std::string& prefix = "model/");

// Copies tensors "<checkpoint_prefix><name>" into the module's parameters/buffers "<module_prefix><name>"
// (e.g. checkpoint_prefix "model/encoder." and module_prefix "encoder." to initialise a fine-tuning model
// from a pre-training checkpoint). Every module tensor under module_prefix must be present with the same
// shape (DataError otherwise); checkpoint tensors the module lacks are ignored. Returns how many were
// copied.
size_t restore_module(torch::nn::Module& module, const Checkpoint& checkpoint,
                      const std::string& checkpoint_prefix = "model/", const std::string& module_prefix = "");

// Tensors under `prefix` with the prefix removed (for AdamW::load_state).
std::map<std::string, torch::Tensor> tensors_with_prefix(const Checkpoint& checkpoint, const std::string& prefix);

}  // namespace cabert::io
