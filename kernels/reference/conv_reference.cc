#include "kernels/reference/conv_reference.h"

#include "kernels/conv_checks.h"

namespace cabert::kernels::reference {
namespace {

at::Tensor zero_masked_positions(const at::Tensor& x, const at::Tensor& mask) {
  if (!mask.defined()) return x;
  return x * mask.unsqueeze(-1).to(x.scalar_type());
}

// [B, T, C] -> [B, T, C, K] with element [b, t, c, k] = x[b, t + k - padding_left, c] (zero outside).
at::Tensor unfold_taps(const at::Tensor& x, int64_t kernel_size, int64_t padding_left) {
  at::Tensor padded = at::constant_pad_nd(x, {0, 0, padding_left, kernel_size - 1 - padding_left});
  return padded.unfold(1, kernel_size, 1);
}

}  // namespace

at::Tensor lightweight_conv(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                            const at::Tensor& mask) {
  const ConvShape shape = check_lightweight_conv(x, weight, padding_left, mask);
  at::Tensor per_channel = weight.repeat_interleave(shape.channels / shape.heads, 0);  // [C, K]
  at::Tensor taps = unfold_taps(zero_masked_positions(x, mask), shape.kernel_size, padding_left);
  return zero_masked_positions((taps * per_channel).sum(-1), mask);
}

at::Tensor dynamic_conv(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left, const at::Tensor& mask) {
  const ConvShape shape = check_dynamic_conv(x, kernels, padding_left, mask);
  at::Tensor taps =
      unfold_taps(zero_masked_positions(x, mask), shape.kernel_size, padding_left)
          .reshape({shape.batch, shape.length, shape.heads, shape.channels / shape.heads, shape.kernel_size});
  at::Tensor out = (taps * kernels.unsqueeze(3)).sum(-1).reshape({shape.batch, shape.length, shape.channels});
  return zero_masked_positions(out, mask);
}

at::Tensor depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t padding_left,
                          const at::Tensor& mask) {
  const ConvShape shape = check_depthwise_conv(x, weight, bias, padding_left, mask);
  at::Tensor channels_first = zero_masked_positions(x, mask).transpose(1, 2);  // [B, C, T]
  at::Tensor padded = at::constant_pad_nd(channels_first, {padding_left, shape.kernel_size - 1 - padding_left});
  at::Tensor out = at::conv1d(padded, weight.unsqueeze(1), bias, /*stride=*/at::IntArrayRef{1},
                              /*padding=*/at::IntArrayRef{0}, /*dilation=*/at::IntArrayRef{1},
                              /*groups=*/shape.channels);
  return zero_masked_positions(out.transpose(1, 2), mask);
}

at::Tensor relative_index_matrix(int64_t length, int64_t radius, const at::Device& device) {
  at::Tensor positions = at::arange(length, at::TensorOptions().dtype(at::kLong).device(device));
  return (positions.unsqueeze(0) - positions.unsqueeze(1)).clamp(-radius, radius) + radius;  // [i, j] -> j - i
}

at::Tensor relative_position_scores(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta, int64_t radius,
                                    double scale) {
  const RelposShape shape = check_relative_position_scores(q, w, beta, radius);
  at::Tensor index = relative_index_matrix(shape.length, radius, q.device());  // [T, T]
  at::Tensor out;
  if (w.defined()) {
    at::Tensor band = at::matmul(q, w.t());  // [B, N, T, 2n+1]
    out = band.gather(3, index.expand({shape.batch, shape.heads, shape.length, shape.length})) * scale;
  }
  if (beta.defined()) {
    at::Tensor bias = beta.index_select(1, index.reshape({-1})).reshape({shape.heads, shape.length, shape.length});
    out = out.defined() ? out + bias.unsqueeze(0)
                        : bias.unsqueeze(0).expand({shape.batch, shape.heads, shape.length, shape.length}).contiguous();
  }
  return out;
}

}  // namespace cabert::kernels::reference
