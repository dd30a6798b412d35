// Helpers of the kernel tests: run an op on a kernel path and collect its output and the gradients of a fixed
// random projection of it with respect to every differentiable input.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "lib/ops/conv_ops.h"

namespace cabert::testing {

using ops::ScopedKernelPath;

struct OpRun {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;  // one per input (zeros where autograd gave none)
};

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

}  // namespace cabert::testing
