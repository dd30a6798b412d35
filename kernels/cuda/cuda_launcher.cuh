// The Launcher of kernels/cuda/*_kernels.cuh's host code on a CUDA device: kernel<<<blocks, threads>>>(args...) on
// the current stream (the entry points make the input's device current first), every launch checked. The tests
// run the same host code with tests/kernels/cuda_emulator.h's EmulatedLauncher.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <cstdint>

namespace cabert::kernels::cuda {

struct CudaLauncher {
  static constexpr int64_t kMaxBlocks = 65535;  // at most this many blocks; grid-stride loops take the rest
  static constexpr int64_t kFillBlocks = 2048;  // enough blocks to fill any GPU
  template <typename Kernel, typename... Args>
  static void run(int blocks, int threads, Kernel kernel, Args... args) {
    kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(args...);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
};

}  // namespace cabert::kernels::cuda
