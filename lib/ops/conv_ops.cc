#include "lib/ops/conv_ops.h"

#include <ATen/record_function.h>

#include <optional>

#include "kernels/conv_kernels.h"
#include "kernels/reference/conv_reference.h"
#include "lib/core/errors.h"
#include "lib/ops/mixed_precision.h"
#include "lib/ops/optional_tensor.h"

namespace cabert::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The fused kernels compute their own backward; each Function saves its inputs (never an unfolded tensor). Each
// forward is a named range in PyTorch's profiler (`bench --profile`); the backward shows as CppNode<...Function>.

// The per-head convolutions, lightweight (weight [H, K]) and dynamic (kernels [B, T, H, K]), have one autograd
// Function: Op, a subclass naming the pair, gives its profiler range (kRange), its entry points (forward_kernel,
// backward_kernel) and, as the CRTP type, its node's name (CppNode<LightweightConvFunction>).
template <typename Op>
struct HeadConvFunction : public torch::autograd::Function<Op> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& taps,
                               int64_t padding_left, const std::optional<torch::Tensor>& mask_arg) {
    RECORD_FUNCTION(Op::kRange, c10::ArrayRef<const c10::IValue>{});
    const torch::Tensor mask = mask_arg.value_or(torch::Tensor());
    ctx->save_for_backward({x, taps, mask});
    ctx->saved_data["padding_left"] = padding_left;
    return Op::forward_kernel(x, taps, padding_left, mask);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    kernels::ConvGrads grads =
        Op::backward_kernel(grad_outputs[0], saved[0], saved[1], ctx->saved_data["padding_left"].toInt(), saved[2]);
    return {grads.x, grads.weight, torch::Tensor(), torch::Tensor()};
  }
};

struct LightweightConvFunction : HeadConvFunction<LightweightConvFunction> {
  static constexpr const char* kRange = "cabert::lightweight_conv";
  static constexpr auto forward_kernel = &kernels::lightweight_conv_forward;
  static constexpr auto backward_kernel = &kernels::lightweight_conv_backward;
};

struct DynamicConvFunction : HeadConvFunction<DynamicConvFunction> {
  static constexpr const char* kRange = "cabert::dynamic_conv";
  static constexpr auto forward_kernel = &kernels::dynamic_conv_forward;
  static constexpr auto backward_kernel = &kernels::dynamic_conv_backward;
};

struct DepthwiseConvFunction : public torch::autograd::Function<DepthwiseConvFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const std::optional<torch::Tensor>& bias_arg, int64_t padding_left,
                               const std::optional<torch::Tensor>& mask_arg) {
    RECORD_FUNCTION("cabert::depthwise_conv", c10::ArrayRef<const c10::IValue>{});
    const torch::Tensor bias = bias_arg.value_or(torch::Tensor());
    const torch::Tensor mask = mask_arg.value_or(torch::Tensor());
    ctx->save_for_backward({x, weight, mask});
    ctx->saved_data["has_bias"] = bias.defined();
    ctx->saved_data["padding_left"] = padding_left;
    return kernels::depthwise_conv_forward(x, weight, bias, padding_left, mask);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    // Only definedness of the bias matters to the backward: pass an empty stand-in of the right kind.
    torch::Tensor bias_marker = ctx->saved_data["has_bias"].toBool() ? torch::empty({0}) : torch::Tensor();
    kernels::ConvGrads grads = kernels::depthwise_conv_backward(grad_outputs[0], saved[0], saved[1], bias_marker,
                                                                ctx->saved_data["padding_left"].toInt(), saved[2]);
    return {grads.x, grads.weight, grads.bias, torch::Tensor(), torch::Tensor()};
  }
};

struct RelativePositionScoresFunction : public torch::autograd::Function<RelativePositionScoresFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const std::optional<torch::Tensor>& w_arg,
                               const std::optional<torch::Tensor>& beta_arg, int64_t radius, double scale) {
    RECORD_FUNCTION("cabert::relative_position_scores", c10::ArrayRef<const c10::IValue>{});
    const torch::Tensor w = w_arg.value_or(torch::Tensor());
    const torch::Tensor beta = beta_arg.value_or(torch::Tensor());
    ctx->save_for_backward({q, w, beta});
    ctx->saved_data["radius"] = radius;
    ctx->saved_data["scale"] = scale;
    return kernels::relative_position_scores_forward(q, w, beta, radius, scale);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    kernels::RelposGrads grads = kernels::relative_position_scores_backward(grad_outputs[0], saved[0], saved[1],
                                                                            saved[2], ctx->saved_data["radius"].toInt(),
                                                                            ctx->saved_data["scale"].toDouble());
    return {grads.q, grads.w, grads.beta, torch::Tensor(), torch::Tensor()};
  }
};

bool fused() { return kernel_path() == KernelPath::kFused; }

}  // namespace

torch::Tensor lightweight_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding_left,
                               const torch::Tensor& mask) {
  if (needs_float_region({x, weight})) {
    FloatRegion region;
    return lightweight_conv(to_float32(x), to_float32(weight), padding_left, mask);
  }
  if (!fused()) return kernels::reference::lightweight_conv(x, weight, padding_left, mask);
  return LightweightConvFunction::apply(x, weight, padding_left, optional_tensor(mask));
}

torch::Tensor dynamic_conv(const torch::Tensor& x, const torch::Tensor& kernels, int64_t padding_left,
                           const torch::Tensor& mask) {
  if (needs_float_region({x, kernels})) {
    FloatRegion region;
    return dynamic_conv(to_float32(x), to_float32(kernels), padding_left, mask);
  }
  if (!fused()) return kernels::reference::dynamic_conv(x, kernels, padding_left, mask);
  return DynamicConvFunction::apply(x, kernels, padding_left, optional_tensor(mask));
}

torch::Tensor depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding_left, const torch::Tensor& mask) {
  if (needs_float_region({x, weight, bias})) {
    FloatRegion region;
    return depthwise_conv(to_float32(x), to_float32(weight), to_float32(bias), padding_left, mask);
  }
  if (!fused()) return kernels::reference::depthwise_conv(x, weight, bias, padding_left, mask);
  return DepthwiseConvFunction::apply(x, weight, optional_tensor(bias), padding_left, optional_tensor(mask));
}

torch::Tensor dilated_depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t dilation,
                                     int64_t padding_left, const torch::Tensor& mask) {
  const int64_t C = x.size(2), K = weight.size(1), span = (K - 1) * dilation;
  torch::Tensor input = mask.defined() ? x * mask.unsqueeze(-1).to(x.scalar_type()) : x;
  input = torch::constant_pad_nd(input.transpose(1, 2), {padding_left, span - padding_left});  // [B, C, T + span]
  const int64_t stride = 1, padding = 0;
  torch::Tensor out = torch::conv1d(input, weight.unsqueeze(1), torch::Tensor(), c10::IntArrayRef(stride),
                                    c10::IntArrayRef(padding), c10::IntArrayRef(dilation), C);
  out = out.transpose(1, 2);
  return mask.defined() ? out * mask.unsqueeze(-1).to(x.scalar_type()) : out;
}

torch::Tensor relative_position_scores(const torch::Tensor& q, const torch::Tensor& w, const torch::Tensor& beta,
                                       int64_t radius, double scale) {
  if (needs_float_region({q, w, beta})) {
    FloatRegion region;
    return relative_position_scores(to_float32(q), to_float32(w), to_float32(beta), radius, scale);
  }
  if (!fused()) return kernels::reference::relative_position_scores(q, w, beta, radius, scale);
  return RelativePositionScoresFunction::apply(q, optional_tensor(w), optional_tensor(beta), radius, scale);
}

}  // namespace cabert::ops
