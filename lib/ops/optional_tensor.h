// Optional tensor arguments (masks, biases, relative terms) reach torch::autograd::Function::apply as
// std::optional: autograd cannot take an undefined at::Tensor as an input.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace cabert::ops {

inline std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

}  // namespace cabert::ops
