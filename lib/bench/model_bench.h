// Timing of whole models for `cabert bench --model PRESET`: MLM training steps (forward, cross-entropy,
// backward, AdamW) and encoder inference, on each kernel path, with peak tensor memory and analytic FLOPs.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/bench.pb.h"
#include "formats/model.pb.h"
#include "lib/bench/run_profile.h"
#include "lib/ops/conv_ops.h"
#include "lib/train/optimizer.h"

namespace cabert::bench {

struct ModelBenchConfig {
  pb::ModelConfig model;
  std::string model_name;  // as given on the command line (preset or config file)
  int64_t batch = 8, seq = 128;
  std::vector<ops::KernelPath> paths = {ops::KernelPath::kReference, ops::KernelPath::kFused};
  int warmup = 2, repeats = 10;
  uint64_t seed = 42;
  // Where the models run; the batch is drawn on the CPU (the same values on every device), then moved there.
  torch::Device device = torch::kCPU;
  // bfloat16 autocast around every step and forward (lib/ops/mixed_precision.h), as `pretrain --amp` trains.
  bool amp = false;
  // When asked, more training steps per path under PyTorch's profiler after the timed ones
  // (lib/bench/run_profile.h), into DIR/MODEL-PATH-train-B..-T...md and its Chrome trace.
  ProfileRequest profile;
};

// One record per path, in the order of config.paths. Every path gets its own model built from the same seed
// (identical weights) and the same batch, and the paths take turns repeat by repeat, so a machine whose speed
// drifts during the run slows every path alike. The fused record carries its training speed-up over the
// reference when both ran. Times and peaks as lib/bench/run_timing.h takes them on config.device (CUDA: events,
// the caching allocator). Throws UsageError when seq exceeds the model's max_length.
std::vector<pb::BenchRecord> bench_model(const ModelBenchConfig& config);

// The optimizer of the benches' training steps: cabert's AdamW, the one `pretrain` runs (PyTorch's fused kernel,
// no decay on biases and LayerNorm), at lr 1e-4 with its default betas, eps and weight decay.
train::AdamWOptions bench_adamw_options();

// The fields every whole-model record starts with (kind "model" or "seq2seq"; training with backward; dtype
// "float", or "bfloat16 autocast" with amp; the device).
pb::BenchRecord model_record(const std::string& kind, const std::string& model_name, const pb::ModelConfig& config,
                             ops::KernelPath path, int64_t batch, int64_t seq, int64_t parameters,
                             const torch::Device& device, bool amp);

}  // namespace cabert::bench
