// Plain-ATen reference implementations of the convolution-branch ops: the oracle of the kernel tests and the
// `--kernels reference` fallback. They differentiate through ATen autograd and favour obviousness over speed
// (lightweight and dynamic convolution materialise the B x T x C x K unfold tensor on purpose: that is the
// formula written out, and the cost the fused kernels remove).
//
// Layout conventions shared by every op (see lib/ops/conv_ops.h for the public contract):
//   x [B, T, C], batch first; the C channels form H contiguous head blocks of C/H channels;
//   mask [B, T] bool (true = real token) or undefined; masked inputs contribute zero, masked outputs are zero;
//   output position t reads taps t + k - padding_left, k = 0..K-1; out-of-range taps read zero.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels::reference {

// weight [H, K], head-shared across the C/H channels of each head.
at::Tensor lightweight_conv(const at::Tensor& x, const at::Tensor& weight, int64_t padding_left,
                            const at::Tensor& mask);
// kernels [B, T, H, K]: one kernel per position and head.
at::Tensor dynamic_conv(const at::Tensor& x, const at::Tensor& kernels, int64_t padding_left, const at::Tensor& mask);
// weight [C, K], bias [C] or undefined (added at real positions only).
at::Tensor depthwise_conv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, int64_t padding_left,
                          const at::Tensor& mask);
// q [B, N, T, d], w [2n+1, d] or undefined, beta [N, 2n+1] or undefined; returns [B, N, T, T].
at::Tensor relative_position_scores(const at::Tensor& q, const at::Tensor& w, const at::Tensor& beta, int64_t radius,
                                    double scale);

// [T, T] int64 matrix of r(i, j) = clamp(j - i, -radius, radius) + radius.
at::Tensor relative_index_matrix(int64_t length, int64_t radius, const at::Device& device);

}  // namespace cabert::kernels::reference
