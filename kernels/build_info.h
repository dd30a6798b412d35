// What the kernels library was built with, for `cabert --version`, bench records and clear errors.
#pragma once

#include <string>

namespace cabert::kernels {

// True when kernels/cuda was compiled in (nvcc and a CUDA-enabled LibTorch were found by CMake).
bool built_with_cuda();
// Throws cabert::UsageError("... built without CUDA ...") when a CUDA tensor reaches a kernel of a build
// without CUDA kernels.
void require_cuda_build(const char* op_name);
// "LibTorch 2.x.y, CUDA kernels: yes/no, CPU kernels: native|portable, threads: N".
std::string describe_build();
// True when kernels/cpu was compiled with -march=native (CMake option CABERT_NATIVE_KERNELS).
bool native_cpu_kernels();
// The source tree this binary was configured from (for `git rev-parse` in bench records).
std::string source_tree();

}  // namespace cabert::kernels
