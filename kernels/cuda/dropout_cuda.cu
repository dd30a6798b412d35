// One thread per Philox counter block a run of indices meets (kernels/dropout_kernels.h: up to four of the
// run's elements), grid-stride: the same words as the CPU kernel's lanes and the reference's one-block form,
// so every device drops the same elements.
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
__global__ void dropout_kernel(const T* x, T* y, DrawRuns runs, float p, at::opmath_type<T> kept, uint64_t seed,
                               uint64_t offset) {
  using Acc = at::opmath_type<T>;
  const int64_t items = runs.rows * philox::blocks_per_run(runs);
  for (int64_t item = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; item < items;
       item += int64_t(blockDim.x) * gridDim.x) {
    const philox::RunBlock cover = philox::run_block(runs, item);
    if (cover.block * 4 >= cover.stop) continue;
    const philox::Words words = philox::block(seed, offset, cover.block);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int64_t e = philox::element_of(runs, cover, w);
      if (e >= 0) y[e] = static_cast<T>(philox::uniform(words.w[w]) >= p ? static_cast<Acc>(x[e]) * kept : Acc(0));
    }
  }
}

}  // namespace

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs) {
  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int64_t items = runs.rows * philox::blocks_per_run(runs);
  const int grid = static_cast<int>(std::min<int64_t>((items + kThreads - 1) / kThreads, kMaxBlocks));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "philox_dropout_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;  // the factor rounded from double, as on the CPU
    dropout_kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), runs, static_cast<float>(draw.p),
        static_cast<Acc>(1.0 / (1.0 - draw.p)), draw.seed, draw.offset);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return y;
}

}  // namespace cabert::kernels::cuda
