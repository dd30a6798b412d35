#include "lib/ops/dropout_ops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>

#include <mutex>

#include "kernels/build_info.h"
#include "lib/core/errors.h"
#include "lib/ops/kernel_path.h"

namespace cabert::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

kernels::DropoutDraw draw_of(double p, int64_t seed) {
  kernels::DropoutDraw draw;
  draw.p = p;
  draw.seed = static_cast<uint64_t>(seed);
  return draw;
}

// Dropout is linear in x with a diagonal 0 or 1 / (1 - p): its backward is the same product on the gradient
// (itself differentiable, through this Function again).
struct PhiloxDropoutFunction : public torch::autograd::Function<PhiloxDropoutFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, double p, int64_t seed) {
    RECORD_FUNCTION("cabert::philox_dropout", c10::ArrayRef<const c10::IValue>{});  // named in profiles
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    return kernels::philox_dropout(x, draw_of(p, seed));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const double p = ctx->saved_data["p"].toDouble();
    const int64_t seed = ctx->saved_data["seed"].toInt();
    return {PhiloxDropoutFunction::apply(grad_outputs[0], p, seed), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

uint64_t draw_seed() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

kernels::DropoutDraw draw_dropout(double p) {
  kernels::DropoutDraw draw;
  draw.p = p;
  if (p > 0) draw.seed = draw_seed();
  return draw;
}

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!(p >= 0 && p < 1)) throw UsageError(str("dropout: expected a probability in [0, 1), got ", p));
  if (!training || p == 0) return x;
  const kernels::DropoutDraw draw = draw_dropout(p);
  // A CUDA tensor in a build without CUDA kernels takes the reference's product: the same mask, made on the CPU.
  const bool kernel = x.is_cpu() || (x.is_cuda() && kernels::built_with_cuda());
  if (kernel_path() == KernelPath::kFused && kernel) {
    return PhiloxDropoutFunction::apply(x, p, static_cast<int64_t>(draw.seed));
  }
  return kernels::dropout_reference(x, draw);
}

}  // namespace cabert::ops
