// The composite attention's tiled CUDA kernels: kernels/cuda/attention_cuda_kernels.cuh's kernels and host code,
// launched on the current stream of the input's device, made current first (the tests run the same header on the
// CPU through tests/kernels/cuda_emulator.h).
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/attention_cuda_kernels.cuh"
#include "kernels/cuda/cuda_launcher.cuh"

namespace cabert::kernels::cuda {

bool tiled_attention_takes(const AttentionInputs& in) { return impl::tiles::takes_tiles(in); }

AttentionOutputs tiled_attention_forward(const AttentionInputs& in) {
  const c10::cuda::CUDAGuard device_guard(in.q.device());
  return impl::tiles::forward<CudaLauncher>(in);
}

AttentionGrads tiled_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                        const AttentionOutputs& forward) {
  const c10::cuda::CUDAGuard device_guard(in.q.device());
  return impl::tiles::backward<CudaLauncher>(grad_out, in, forward);
}

}  // namespace cabert::kernels::cuda
