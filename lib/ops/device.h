// The one parser of --device: "cpu", "cuda" (the current CUDA device) or "cuda:N".
#pragma once

#include <torch/torch.h>

#include <string>

namespace cabert::ops {

// UsageError for anything else ("expected cpu, cuda or cuda:N, got ..."), for CUDA in a build without CUDA
// kernels, and for a CUDA device this machine does not have.
torch::Device parse_device(const std::string& name);

// Whether a tensor on `actual` is on `expected`. A device without an index ("cuda", as parse_device gives it for
// --device cuda) stands for its type's current device, and a tensor's device always has one (cuda:0), so an
// unindexed `expected` matches every index of its type; an indexed one only itself.
bool on_device(const torch::Device& actual, const torch::Device& expected);

}  // namespace cabert::ops
