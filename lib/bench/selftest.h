// `cabert selftest`: what this build is and whether its kernels compute what the reference does on this machine's
// devices. A user with a new machine or GPU runs it first: it lists the build (LibTorch, CUDA architectures, CPU
// kernel ISA), the devices, the code each op runs on each device, then checks every op with a fused kernel
// against the plain-ATen reference on every device (forward and every gradient, in double, on small shapes
// that cover K > T, T not a multiple of a tile and B = 1; on CUDA the composite attention in float too, whose
// route differs there). Seconds, not minutes.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/attention_kernels.h"

namespace cabert::bench {

struct SelftestCheck {
  std::string op, device, against;  // against: "reference on the same device" or "reference on the CPU"
  std::string shape;                // "B=2 T=7 C=8 H=2 K=9"
  double max_error = 0;             // largest |fused - reference| over the output and every gradient, relative
  double tolerance = 0;
  bool ok = false;
};

// The devices `spec` names: "all" (the CPU and every CUDA device), "cpu", "cuda" (every CUDA device) or "cuda:N".
std::vector<torch::Device> selftest_devices(const std::string& spec);

// The composite attention's CUDA route the checks take: the --cuda-attention route in force, but regions for
// auto (which would hand the checks' small problems to the reference).
kernels::CudaAttentionRoute selftest_attention_route();

// Which code `op` (an op_bench_names() entry with kernel paths) runs on `device` in the checks (on CUDA, the
// composite attention's selftest_attention_route()).
std::string selftest_route(const std::string& op, const torch::Device& device);

// Largest |a - b| / max(1, |b|max) over pairs of tensors (compared on the CPU in double); infinity when shapes
// differ or a value is not finite.
double relative_max_error(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b);

// Runs the checks on `devices`, reporting each one as it finishes.
std::vector<SelftestCheck> run_selftest(const std::vector<torch::Device>& devices,
                                        const std::function<void(const SelftestCheck&)>& report);

}  // namespace cabert::bench
