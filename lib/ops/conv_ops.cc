#include "lib/ops/conv_ops.h"

#include <atomic>

#include "kernels/reference/conv_reference.h"
#include "lib/core/errors.h"

namespace cabert::ops {
namespace {

std::atomic<KernelPath> current_path{KernelPath::kFused};

}  // namespace

void set_kernel_path(KernelPath path) { current_path.store(path); }

KernelPath kernel_path() { return current_path.load(); }

KernelPath parse_kernel_path(const std::string& name) {
  if (name == "fused") return KernelPath::kFused;
  if (name == "reference") return KernelPath::kReference;
  throw UsageError(str("--kernels: expected fused or reference, got '", name, "'"));
}

std::string kernel_path_name(KernelPath path) { return path == KernelPath::kFused ? "fused" : "reference"; }

torch::Tensor lightweight_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding_left,
                               const torch::Tensor& mask) {
  return kernels::reference::lightweight_conv(x, weight, padding_left, mask);
}

torch::Tensor dynamic_conv(const torch::Tensor& x, const torch::Tensor& kernels, int64_t padding_left,
                           const torch::Tensor& mask) {
  return kernels::reference::dynamic_conv(x, kernels, padding_left, mask);
}

torch::Tensor depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding_left, const torch::Tensor& mask) {
  return kernels::reference::depthwise_conv(x, weight, bias, padding_left, mask);
}

torch::Tensor relative_position_scores(const torch::Tensor& q, const torch::Tensor& w, const torch::Tensor& beta,
                                       int64_t radius, double scale) {
  return kernels::reference::relative_position_scores(q, w, beta, radius, scale);
}

}  // namespace cabert::ops
