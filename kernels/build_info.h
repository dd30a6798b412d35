// What the kernels library was built with, for `cabert --version`, bench records and clear errors.
#pragma once

#include <string>

namespace cabert::kernels {

// True when kernels/cuda was compiled in (nvcc and a CUDA-enabled LibTorch were found by CMake).
bool built_with_cuda();
// Throws cabert::UsageError("... built without CUDA ...") when a CUDA tensor reaches a kernel of a build
// without CUDA kernels.
void require_cuda_build(const char* op_name);
// "LibTorch 2.x.y, CUDA kernels: yes/no, threads: N".
std::string describe_build();

}  // namespace cabert::kernels
