// The one parser of --device: "cpu", "cuda" (the current CUDA device) or "cuda:N".
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace cabert::ops {

// UsageError for anything else ("expected cpu, cuda or cuda:N, got ..."), for CUDA in a build without CUDA
// kernels, and for a CUDA device this machine does not have.
torch::Device parse_device(const std::string& name);

// parse_device, and an indexed CUDA device made the process's current CUDA device, as a training process
// should (torch.cuda.set_device): what PyTorch creates without naming a device (a CUDA context, the current
// stream, NCCL's communicators, tensors on "cuda") then goes to that GPU, not to GPU 0 for every process.
torch::Device select_device(const std::string& name);

// `device` with its index said: a CUDA device without one ("cuda") as the current CUDA device (cuda:0 unless
// the process chose another); the CPU and indexed devices as they are. For records that name where they ran.
torch::Device indexed_device(const torch::Device& device);

// The values of one-element tensors (any dtype, on one device or several) as doubles, copied to the host in one
// transfer: one wait on the device where a .item() per value waited once each.
std::vector<double> read_scalars(const std::vector<torch::Tensor>& scalars);

// Whether a tensor on `actual` is on `expected`. A device without an index ("cuda", as parse_device gives it for
// --device cuda) stands for its type's current device, and a tensor's device always has one (cuda:0), so an
// unindexed `expected` matches every index of its type; an indexed one only itself.
bool on_device(const torch::Device& actual, const torch::Device& expected);

}  // namespace cabert::ops
