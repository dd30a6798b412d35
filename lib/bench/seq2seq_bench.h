// Timing of encoder-decoders for `cabert bench --model PRESET` when the preset has a decoder, one record per
// length L (Tay et al.'s linear-vs-quadratic comparison in one table):
//   training step: source and target of L tokens, forward + label-smoothed cross-entropy + backward + AdamW;
//   generation:    L target tokens decoded one at a time with the incremental state (always the most likely
//                  token, EOS never ends it) from a fixed short source (32 tokens), so the time reflects the
//                  decoder's own mixing: per step O(k) for a causal convolution, O(prefix) for self-attention.
// Times and peaks as lib/bench/run_timing.h takes them on the config's device (CUDA: events around each run and
// between decoding steps, the caching allocator's peak).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/bench.pb.h"
#include "formats/model.pb.h"
#include "lib/bench/run_profile.h"
#include "lib/ops/kernel_path.h"

namespace cabert::bench {

struct Seq2SeqBenchConfig {
  pb::ModelConfig model;
  std::string model_name;
  int64_t batch = 1, length = 128, generation_source = 32;
  ops::KernelPath path = ops::KernelPath::kFused;
  int warmup = 1, repeats = 3;
  uint64_t seed = 42;
  // Where the model runs (the batch is drawn on the CPU, then moved), and bfloat16 autocast around the training
  // step's forward and around generation (as ModelBenchConfig).
  torch::Device device = torch::kCPU;
  bool amp = false;
  // When asked, more training steps and generations under PyTorch's profiler after the timed ones
  // (lib/bench/run_profile.h), into DIR/MODEL-PATH-{train,generate}-B..-L...md and their traces.
  ProfileRequest profile;
};

pb::BenchRecord bench_seq2seq_model(const Seq2SeqBenchConfig& config);

}  // namespace cabert::bench
