// One thread per Philox counter block (four consecutive elements), grid-stride: the same words as the CPU
// kernel's lanes and the reference's one-block form, so every device drops the same elements.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "kernels/cuda/dropout_cuda.h"
#include "kernels/philox.h"

namespace cabert::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

template <typename T>
__global__ void dropout_kernel(const T* x, T* y, int64_t n, float p, at::opmath_type<T> kept, uint64_t seed,
                               uint64_t offset) {
  using Acc = at::opmath_type<T>;
  const int64_t blocks = (n + 3) / 4;
  for (int64_t block = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; block < blocks;
       block += int64_t(blockDim.x) * gridDim.x) {
    const philox::Words words = philox::block(seed, offset, static_cast<uint64_t>(block));
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const int64_t e = block * 4 + lane;
      if (e < n) y[e] = static_cast<T>(philox::uniform(words.w[lane]) >= p ? static_cast<Acc>(x[e]) * kept : Acc(0));
    }
  }
}

}  // namespace

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int grid = static_cast<int>(std::min<int64_t>(((n + 3) / 4 + kThreads - 1) / kThreads, kMaxBlocks));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "philox_dropout_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;  // the factor rounded from double, as on the CPU
    dropout_kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, static_cast<float>(draw.p),
        static_cast<Acc>(1.0 / (1.0 - draw.p)), draw.seed, draw.offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

}  // namespace cabert::kernels::cuda
