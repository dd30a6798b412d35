// Philox dropout on CUDA: kernels/cuda/dropout_cuda_kernels.cuh's kernel and launch on the current stream of the
// input's device (the tests run the same header on the CPU through tests/kernels/cuda_emulator.h).
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/cuda_launcher.cuh"
#include "kernels/cuda/dropout_cuda.h"
#include "kernels/cuda/dropout_cuda_kernels.cuh"

namespace cabert::kernels::cuda {

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  return impl::philox_dropout<CudaLauncher>(x, draw, runs);
}

}  // namespace cabert::kernels::cuda
