#include "kernels/conv_kernels.h"

#include "kernels/build_info.h"
#include "kernels/conv_checks.h"
#include "kernels/cpu/conv_cpu.h"
#include "lib/core/errors.h"
#ifdef CABERT_WITH_CUDA
#include "kernels/cuda/conv_cuda.h"
#endif

namespace cabert::kernels {
namespace {

at::Tensor contiguous_or_undefined(const at::Tensor& t) { return t.defined() ? t.contiguous() : t; }

// The single device switch: every fused op below goes through it.
#ifdef CABERT_WITH_CUDA
#define CABERT_DEVICE_CALL(device_tensor, op_name, function, ...) \
  ((device_tensor).is_cuda() ? cuda::function(__VA_ARGS__)        \
                             : (check_cpu(device_tensor, op_name), cpu::function(__VA_ARGS__)))
#else
#define CABERT_DEVICE_CALL(device_tensor, op_name, function, ...)                        \
  ((device_tensor).is_cuda() ? (require_cuda_build(op_name), cpu::function(__VA_ARGS__)) \
                             : (check_cpu(device_tensor, op_name), cpu::function(__VA_ARGS__)))
#endif

void check_cpu(const at::Tensor& t, const char* op_name) {
  if (!t.is_cpu()) throw UsageError(str(op_name, ": expected a CPU or CUDA tensor, got one on ", t.device()));
}

// Per-channel [C, K] weight gradient -> [G, K] by summing the channels that share a row.
at::Tensor sum_channel_groups(const at::Tensor& per_channel, int64_t groups) {
  const int64_t channels = per_channel.size(0);
  if (groups == channels) return per_channel.contiguous();
  return per_channel.reshape({groups, channels / groups, per_channel.size(1)}).sum(1);
}

at::Tensor real_positions_sum(const at::Tensor& grad, const at::Tensor& mask) {
  at::Tensor masked = mask.defined() ? grad * mask.unsqueeze(-1).to(grad.scalar_type()) : grad;
  return masked.sum(at::IntArrayRef{0, 1});
}

}  // namespace

at::Tensor lightweight_conv_forward(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                                    const at::Tensor& mask) {
  check_lightweight_conv(x, weight, padding_left, mask);
  return CABERT_DEVICE_CALL(x, "lightweight_conv", grouped_conv_forward, x.contiguous(), weight.contiguous(),
                            at::Tensor(), padding_left, contiguous_or_undefined(mask));
}

ConvGrads lightweight_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                    int64_t padding_left, const at::Tensor& mask) {
  ConvGrads grads;
  at::Tensor per_channel;
  CABERT_DEVICE_CALL(x, "lightweight_conv", grouped_conv_backward, grad.contiguous(), x.contiguous(),
                     weight.contiguous(), padding_left, contiguous_or_undefined(mask), grads.x, per_channel);
  grads.weight = sum_channel_groups(per_channel, weight.size(0));
  return grads;
}

at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left,
                                const at::Tensor& mask) {
  check_dynamic_conv(x, kernels, padding_left, mask);
  return CABERT_DEVICE_CALL(x, "dynamic_conv", dynamic_conv_forward, x.contiguous(), kernels.contiguous(), padding_left,
                            contiguous_or_undefined(mask));
}

ConvGrads dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels,
                                int64_t padding_left, const at::Tensor& mask) {
  ConvGrads grads;
  CABERT_DEVICE_CALL(x, "dynamic_conv", dynamic_conv_backward, grad.contiguous(), x.contiguous(), kernels.contiguous(),
                     padding_left, contiguous_or_undefined(mask), grads.x, grads.weight);
  return grads;
}

at::Tensor depthwise_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                  int64_t padding_left, const at::Tensor& mask) {
  check_depthwise_conv(x, weight, bias, padding_left, mask);
  return CABERT_DEVICE_CALL(x, "depthwise_conv", grouped_conv_forward, x.contiguous(), weight.contiguous(),
                            contiguous_or_undefined(bias), padding_left, contiguous_or_undefined(mask));
}

ConvGrads depthwise_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                  const at::Tensor& bias, int64_t padding_left, const at::Tensor& mask) {
  ConvGrads grads;
  at::Tensor per_channel;
  at::Tensor grad_c = grad.contiguous();
  CABERT_DEVICE_CALL(x, "depthwise_conv", grouped_conv_backward, grad_c, x.contiguous(), weight.contiguous(),
                     padding_left, contiguous_or_undefined(mask), grads.x, per_channel);
  grads.weight = per_channel.contiguous();
  if (bias.defined()) grads.bias = real_positions_sum(grad_c, mask);
  return grads;
}

at::Tensor relative_position_scores_forward(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta,
                                            int64_t radius, double scale) {
  const RelposShape shape = check_relative_position_scores(q, w, beta, radius);
  // The [T, 2n+1] band q . w[r] is a small matmul (BLAS on any device); only the scatter into [T, T] is ours.
  at::Tensor band = w.defined() ? (at::matmul(q, w.t()) * scale).contiguous() : at::Tensor();
  return CABERT_DEVICE_CALL(q, "relative_position_scores", relpos_expand, band, contiguous_or_undefined(beta),
                            shape.batch, shape.heads, shape.length, radius);
}

RelposGrads relative_position_scores_backward(const at::Tensor& grad, const at::Tensor& q, const at::Tensor& w,
                                              const at::Tensor& beta, int64_t radius, double scale) {
  const RelposShape shape = check_relative_position_scores(q, w, beta, radius);
  at::Tensor band_grad = CABERT_DEVICE_CALL(q, "relative_position_scores", relpos_reduce, grad.contiguous(), radius);
  RelposGrads grads;
  if (beta.defined()) grads.beta = band_grad.sum(at::IntArrayRef{0, 2});
  if (w.defined()) {
    at::Tensor scaled = band_grad * scale;  // [B, N, T, 2n+1]
    grads.q = at::matmul(scaled, w);
    grads.w = at::matmul(scaled.reshape({-1, shape.width}).t(), q.reshape({-1, shape.head_size}));
  }  // else only beta: the scores do not depend on q, its gradient stays undefined (zero)
  return grads;
}

}  // namespace cabert::kernels
