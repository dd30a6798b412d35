// The one parser of --device: "cpu", "cuda" (the current CUDA device) or "cuda:N".
#pragma once

#include <torch/torch.h>

#include <string>

namespace cabert::ops {

// UsageError for anything else ("expected cpu, cuda or cuda:N, got ..."), for CUDA in a build without CUDA
// kernels, and for a CUDA device this machine does not have.
torch::Device parse_device(const std::string& name);

}  // namespace cabert::ops
