// Helpers of the kernel tests: run an op on a kernel path and collect its output and the gradients of a fixed
// random projection of it with respect to every differentiable input.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "lib/ops/conv_ops.h"

namespace cabert::testing {

using ops::ScopedKernelPath;

struct OpRun {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;  // one per input (zeros where autograd gave none)
};

inline torch::TensorOptions f64() { return torch::TensorOptions().dtype(torch::kDouble); }

using Op = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// Inputs are cloned with requires_grad; loss = sum(out * probe).
inline OpRun run_op(const Op& op, const std::vector<torch::Tensor>& inputs, const torch::Tensor& probe) {
  std::vector<torch::Tensor> leaves;
  for (const auto& input : inputs) leaves.push_back(input.detach().clone().requires_grad_(true));
  OpRun run;
  run.out = op(leaves);
  torch::Tensor loss = (run.out * probe).sum();
  auto grads = torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                     /*allow_unused=*/true);
  for (size_t i = 0; i < grads.size(); ++i) {
    run.grads.push_back(grads[i].defined() ? grads[i] : torch::zeros_like(inputs[i]));
  }
  run.out = run.out.detach();
  return run;
}

inline OpRun run_on_path(ops::KernelPath path, const Op& op, const std::vector<torch::Tensor>& inputs,
                         const torch::Tensor& probe) {
  ScopedKernelPath scope(path);
  return run_op(op, inputs, probe);
}

// The output and every gradient of two runs agree within `tolerance` (absolute and relative).
inline void expect_same(const OpRun& got, const OpRun& want, const std::string& where, double tolerance = 1e-10) {
  ASSERT_EQ(got.out.sizes(), want.out.sizes()) << where;
  EXPECT_TRUE(torch::allclose(got.out, want.out, tolerance, tolerance))
      << where << "\nmax diff " << (got.out - want.out).abs().max().item<double>();
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got.grads[i], want.grads[i], tolerance, tolerance))
        << where << " gradient of input " << i << "\nmax diff "
        << (got.grads[i] - want.grads[i]).abs().max().item<double>();
  }
}

// Largest |analytic - numeric| over every element of every input, numeric = central differences of
// sum(op(inputs) * probe) (double precision).
inline double max_finite_difference_error(const Op& op, const std::vector<torch::Tensor>& inputs,
                                          const torch::Tensor& probe, double eps = 1e-6) {
  OpRun analytic = run_op(op, inputs, probe);
  double worst = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    torch::Tensor base = inputs[i].detach().clone().contiguous();
    auto flat = base.view({-1});
    for (int64_t e = 0; e < flat.numel(); ++e) {
      const double original = flat[e].item<double>();
      auto evaluate = [&](double value) {
        torch::NoGradGuard no_grad;
        flat[e] = value;
        std::vector<torch::Tensor> args = inputs;
        args[i] = base;
        return (op(args) * probe).sum().item<double>();
      };
      const double numeric = (evaluate(original + eps) - evaluate(original - eps)) / (2 * eps);
      flat[e] = original;
      worst = std::max(worst, std::abs(numeric - analytic.grads[i].reshape({-1})[e].item<double>()));
    }
  }
  return worst;
}

// A mask with a real prefix of a different length per batch element (the last one fully real), plus one
// masked hole in the middle of the first row when it is long enough.
inline torch::Tensor ragged_mask(int64_t batch, int64_t length) {
  auto mask = torch::ones({batch, length}, torch::kBool);
  for (int64_t b = 0; b + 1 < batch; ++b) {
    const int64_t real = std::max<int64_t>(1, length - 1 - b);
    mask.index_put_({b, torch::indexing::Slice(real, torch::indexing::None)}, false);
  }
  if (length >= 4) mask.index_put_({0, 1}, false);
  return mask;
}

// The convolution tests' case grid: B = 1 and 3, by the given lengths and kernel sizes, each with pads K/2, K-1
// and 0, without and with a ragged mask.
struct ConvCase {
  int64_t batch, length, kernel_size, pad;
  bool masked;
  std::string name() const {
    return "B=" + std::to_string(batch) + " T=" + std::to_string(length) + " K=" + std::to_string(kernel_size) +
           " pad=" + std::to_string(pad) + (masked ? " masked" : "");
  }
};

inline std::vector<ConvCase> conv_cases(std::initializer_list<int64_t> lengths,
                                        std::initializer_list<int64_t> kernel_sizes) {
  std::vector<ConvCase> cases;
  for (int64_t batch : {1, 3})
    for (int64_t length : lengths)
      for (int64_t kernel_size : kernel_sizes)
        for (int64_t pad : {kernel_size / 2, kernel_size - 1, int64_t{0}})
          for (bool masked : {false, true}) cases.push_back({batch, length, kernel_size, pad, masked});
  return cases;
}

}  // namespace cabert::testing
