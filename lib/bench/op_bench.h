// Timing of the convolution-branch ops for `cabert bench --op ...`: each op is set up as the block a model
// runs (see op_bench_description), timed forward or forward + backward after warm-up, with peak tensor
// memory from lib/ops/memory_meter.h.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/bench.pb.h"
#include "lib/bench/run_profile.h"
#include "lib/bench/run_timing.h"
#include "lib/core/errors.h"
#include "lib/ops/conv_ops.h"

namespace cabert::bench {

struct OpBenchConfig {
  std::string op;  // one of op_bench_names()
  int64_t batch = 8, seq = 128, channels = 256, heads = 4, kernel = 17;
  bool backward = false;
  ops::KernelPath path = ops::KernelPath::kFused;
  int warmup = 2, repeats = 10;
  torch::Dtype dtype = torch::kFloat;
  torch::Device device = torch::kCPU;  // inputs are drawn on the CPU (the same values on every device), then moved
  uint64_t seed = 42;
  // When asked, more runs under PyTorch's profiler after the timed ones, summarised into
  // DIR/op_profile_stem(config).md beside its Chrome trace (lib/bench/run_profile.h).
  ProfileRequest profile;
};

// One op as a model runs it: its leaves (inputs and parameters, all requiring grad, on config.device) and the
// forward. Drawn from torch's generator as seeded by the caller.
struct OpSetup {
  std::vector<torch::Tensor> leaves;
  std::function<torch::Tensor()> forward;
};
OpSetup make_op_setup(const OpBenchConfig& config);

// lightconv, dynamicconv, sdconv, sdconv-branch, relpos, convbert-attention, depthwise, attention.
const std::vector<std::string>& op_bench_names();
// The UsageError for an op name that is not one of op_bench_names(), listing them.
UsageError unknown_op(const std::string& op);
// What is timed for `op`, one sentence.
std::string op_bench_description(const std::string& op);
// Whether the op has a fused and a reference path (attention is plain ATen only).
bool op_bench_has_kernel_paths(const std::string& op);

// Median / quartiles / min / max over `repeats` timed runs after `warmup` runs (lib/bench/run_timing.h: on CUDA
// timed by events, with the wall clock beside them), then one more run for the peak tensor memory above the
// inputs (on CUDA the caching allocator's peak). Throws
// UsageError for an unknown op or impossible sizes.
pb::BenchTiming bench_op(const OpBenchConfig& config);

// The name of a row's profile files: op, kernel path, pass and sizes ("dynamicconv-fused-fwdbwd-B8-T2048-C256-H4-K31").
std::string op_profile_stem(const OpBenchConfig& config);

// Machine, threads, LibTorch, BLAS and git commit, for every bench record.
pb::BenchEnvironment bench_environment();

}  // namespace cabert::bench
