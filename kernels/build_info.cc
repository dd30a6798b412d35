#include "kernels/build_info.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <stdexcept>

#include "lib/core/errors.h"

namespace cabert::kernels {

bool built_with_cuda() {
#ifdef CABERT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void require_cuda_build(const char* op_name) {
  if (!built_with_cuda()) {
    throw UsageError(str(op_name, ": a CUDA tensor reached a cabert built without CUDA kernels; rebuild with "
                                  "nvcc and a CUDA-enabled LibTorch (-DCABERT_CUDA=ON)"));
  }
}

bool native_cpu_kernels() {
#ifdef CABERT_NATIVE_KERNELS
  return true;
#else
  return false;
#endif
}

std::string source_tree() {
#ifdef CABERT_SOURCE_TREE
  return CABERT_SOURCE_TREE;
#else
  return "";
#endif
}

std::string describe_build() {
  return str("LibTorch ", TORCH_VERSION, ", CUDA kernels: ", built_with_cuda() ? "yes" : "no",
             ", CPU kernels: ", native_cpu_kernels() ? "native (-march=native)" : "portable",
             ", intra-op threads: ", at::get_num_threads());
}

}  // namespace cabert::kernels
