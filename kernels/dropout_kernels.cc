#include "kernels/dropout_kernels.h"

#include <ATen/Parallel.h>

#include "kernels/build_info.h"
#include "kernels/cpu/dropout_cpu.h"
#ifdef CABERT_WITH_CUDA
#include "kernels/cuda/dropout_cuda.h"
#endif
#include "kernels/philox.h"
#include "lib/core/errors.h"

namespace cabert::kernels {
namespace {

constexpr const char* kOp = "philox_dropout";

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(str(kOp, ": ", message));
}

}  // namespace

at::Tensor philox_dropout(const at::Tensor& x, const DropoutDraw& draw) {
  require(x.defined(), "expected a tensor, got none");
  require(at::isFloatingType(x.scalar_type()),
          str("expected a float, double, half or bfloat16 tensor, got ", x.scalar_type()));
  require(x.is_cpu() || x.is_cuda(), str("expected a CPU or CUDA tensor, got one on ", x.device()));
  require(draw.p >= 0 && draw.p < 1, str("expected a dropout probability in [0, 1), got ", draw.p));
  const at::Tensor c = x.contiguous();
  if (draw.p == 0) return c;
  if (c.is_cuda()) {
    require_cuda_build(kOp);
#ifdef CABERT_WITH_CUDA
    return cuda::philox_dropout(c, draw);
#endif
  }
  return cpu::philox_dropout(c, draw);
}

// The one-block form of kernels/philox.h, independent of the CPU kernel's lanes (the tests compare them).
at::Tensor dropout_keep(at::IntArrayRef sizes, const DropoutDraw& draw) {
  at::Tensor keep = at::empty(sizes, at::TensorOptions().dtype(at::kBool));
  bool* out = keep.data_ptr<bool>();
  const float p = static_cast<float>(draw.p);
  const int64_t total = keep.numel();
  at::parallel_for(0, (total + 3) / 4, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const philox::Words words = philox::block(draw.seed, draw.offset, static_cast<uint64_t>(block));
      for (int64_t lane = 0; lane < 4 && block * 4 + lane < total; ++lane) {
        out[block * 4 + lane] = philox::uniform(words.w[lane]) >= p;
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
