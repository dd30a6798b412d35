// Fused CPU kernels of the convolution-branch ops. Inputs are contiguous CPU tensors of one floating dtype
// (float or double), already checked by kernels/conv_checks.h; the public entry points are in
// kernels/conv_kernels.h. No B x T x C x K tensor is ever built: memory is O(B T C) for the convolutions.
// Work is split over batch x channel blocks (or batch x heads) with at::parallel_for; the innermost loops run
// over contiguous channels and vectorise.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels::cpu {

// weight [G, K] with G dividing C (G = C: depthwise, G = H: lightweight); bias [C] or undefined (added at
// real positions only); mask [B, T] bool or undefined.
at::Tensor grouped_conv_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                int64_t pad, const at::Tensor& mask);
// grad_x [B, T, C] and the per-channel weight gradient [C, K] (the caller sums channels of a group).
void grouped_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel);

// kernels [B, T, H, K].
at::Tensor dynamic_conv_forward(const at::Tensor& x, const at::Tensor& kernels, int64_t pad, const at::Tensor& mask);
void dynamic_conv_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                           const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels);

// [B, N, T, T] scores from band [B, N, T, 2n+1] (or undefined) and beta [N, 2n+1] (or undefined).
at::Tensor relpos_expand(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads,
                         int64_t length, int64_t radius);
// Inverse of relpos_expand's scatter: [B, N, T, T] -> [B, N, T, 2n+1], clipped positions summed.
at::Tensor relpos_reduce(const at::Tensor& grad, int64_t radius);

}  // namespace cabert::kernels::cpu
