// The CUDA kernel of Philox dropout and its launch, in one header that nvcc takes for kernels/cuda/dropout_cuda.cu
// and the host compiler for tests/kernels/dropout_cuda_emulated_test.cc (through tests/kernels/cuda_emulator.h;
// the Launcher as in conv_cuda_kernels.cuh). One thread per Philox counter block a run of indices meets
// (kernels/philox.h: up to four of the run's elements), grid-stride: the same words as the CPU kernel's lanes and
// the reference's one-block form, so every device drops the same elements.
#pragma once

#if !defined(__CUDACC__) && !defined(CABERT_CUDA_EMULATION)
#error "kernels/cuda/dropout_cuda_kernels.cuh: compile it with nvcc, or include tests/kernels/cuda_emulator.h first"
#endif

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cstdint>

#include "kernels/dropout_draw.h"
#include "kernels/philox.h"

namespace cabert::kernels::cuda::impl {

constexpr int kDropoutThreads = 256;

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
    for (int w = 0; w < 4; ++w) {
      const int64_t e = philox::element_of(runs, cover, w);
      if (e >= 0) y[e] = static_cast<T>(philox::uniform(words.w[w]) >= p ? static_cast<Acc>(x[e]) * kept : Acc(0));
    }
  }
}

// x contiguous, 0 < p < 1; the runs of x's elements (draw_runs).
template <typename Launcher>
at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawRuns& runs) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (x.numel() == 0) return y;
  const int64_t items = runs.rows * philox::blocks_per_run(runs);
  const int grid =
      static_cast<int>(std::min<int64_t>((items + kDropoutThreads - 1) / kDropoutThreads, Launcher::kMaxBlocks));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "philox_dropout_cuda", [&] {
    using Acc = at::opmath_type<scalar_t>;  // the factor rounded from double, as on the CPU
    Launcher::run(grid, kDropoutThreads, dropout_kernel<scalar_t>, x.const_data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
                  runs, static_cast<float>(draw.p), static_cast<Acc>(1.0 / (1.0 - draw.p)), draw.seed, draw.offset);
  });
  return y;
}

}  // namespace cabert::kernels::cuda::impl
