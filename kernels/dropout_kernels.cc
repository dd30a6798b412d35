#include "kernels/dropout_kernels.h"

#include <ATen/Parallel.h>

#include "kernels/build_info.h"
#include "kernels/cpu/dropout_cpu.h"
#ifdef CABERT_WITH_CUDA
#include "kernels/cuda/dropout_cuda.h"
#endif
#include "kernels/op_checks.h"
#include "kernels/philox.h"
#include "lib/core/errors.h"

namespace cabert::kernels {
namespace {

constexpr const char* kDropoutOp = "philox_dropout";

}  // namespace

DrawRuns draw_runs(at::IntArrayRef sizes, const DrawIndex& index) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  const int64_t rows = sizes.empty() ? 1 : sizes[0];
  const int64_t length = rows == 0 ? 0 : numel / rows;
  const uint64_t stride = index.row_stride == 0 ? static_cast<uint64_t>(length) : index.row_stride;
  require(stride >= static_cast<uint64_t>(length), kDropoutOp,
          str("expected a row stride of at least the row length ", length, ", got ", index.row_stride));
  if (stride == static_cast<uint64_t>(length)) return {numel == 0 ? 0 : 1, numel, index.first, stride * rows};
  return {rows, length, index.first, stride};
}

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw, const DrawIndex& index) {
  require(x.defined(), kDropoutOp, "expected a tensor, got none");
  require(at::isFloatingType(x.scalar_type()), kDropoutOp,
          str("expected a float, double, half or bfloat16 tensor, got ", x.scalar_type()));
  require(x.is_cpu() || x.is_cuda(), kDropoutOp, str("expected a CPU or CUDA tensor, got one on ", x.device()));
  require(draw.p >= 0 && draw.p < 1, kDropoutOp, str("expected a dropout probability in [0, 1), got ", draw.p));
  const DrawRuns runs = draw_runs(x.sizes(), index);
  const at::Tensor c = x.contiguous();
  if (draw.p == 0) return c;
  if (c.is_cuda()) {
    require_cuda_build(kDropoutOp);
#ifdef CABERT_WITH_CUDA
    return cuda::philox_dropout(c, draw, runs);
#endif
  }
  return cpu::philox_dropout(c, draw, runs);
}

// The one-block form of kernels/philox.h, independent of the CPU kernel's lanes (the tests compare them): each
// run's counter blocks, a block's words going to the elements of the run it covers.
at::Tensor dropout_keep(at::IntArrayRef sizes, const DropoutDraw& draw, const DrawIndex& index) {
  const DrawRuns runs = draw_runs(sizes, index);
  at::Tensor keep = at::empty(sizes, at::TensorOptions().dtype(at::kBool));
  bool* out = keep.data_ptr<bool>();
  const float p = static_cast<float>(draw.p);
  at::parallel_for(0, runs.rows * philox::blocks_per_run(runs), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const philox::RunBlock cover = philox::run_block(runs, item);
      if (cover.block * 4 >= cover.stop) continue;
      const philox::Words words = philox::block(draw.seed, draw.offset, cover.block);
      for (int w = 0; w < 4; ++w) {
        const int64_t e = philox::element_of(runs, cover, w);
        if (e >= 0) out[e] = philox::uniform(words.w[w]) >= p;
      }
    }
  });
  return keep;
}

at::Tensor dropout_reference(const at::Tensor& x, const DropoutDraw& draw) {
  const at::Tensor keep = dropout_keep(x.sizes(), draw).to(x.device()).to(x.scalar_type());
  return x * keep * (1 / (1 - draw.p));
}

}  // namespace cabert::kernels
