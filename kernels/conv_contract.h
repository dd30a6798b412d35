// The contract every device's route of the convolution-branch ops implements, declared once: each signature is a
// function type here, and a route header declares its functions with them (kernels/cpu/conv_cpu.h,
// kernels/cuda/conv_cuda.h), so that the two cannot drift apart. Inputs are contiguous tensors of the route's
// device and one floating dtype (float or double), already checked by kernels/conv_checks.h; the entry points
// that choose the route are in kernels/conv_kernels.h. No B x T x C x K tensor is ever built: memory is O(B T C)
// for the convolutions.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace cabert::kernels::conv_contract {

// x [B, T, C]; weight [G, K] with G dividing C (G = C: depthwise, G = H: lightweight); bias [C] or undefined
// (added at real positions only); mask [B, T] bool or undefined.
using GroupedConvForward = at::Tensor(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                      int64_t pad, const at::Tensor& mask);
// Sets grad_x [B, T, C] and the per-channel weight gradient [C, K] (the caller sums channels of a group).
using GroupedConvBackward = void(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, int64_t pad,
                                 const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_weight_per_channel);

// kernels [B, T, H, K].
using DynamicConvForward = at::Tensor(const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                                      const at::Tensor& mask);
using DynamicConvBackward = void(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& kernels, int64_t pad,
                                 const at::Tensor& mask, at::Tensor& grad_x, at::Tensor& grad_kernels);

// [B, N, T, T] scores from band [B, N, T, 2n+1] (or undefined) and beta [N, 2n+1] (or undefined).
using RelposExpand = at::Tensor(const at::Tensor& band, const at::Tensor& beta, int64_t batch, int64_t heads,
                                int64_t length, int64_t radius);
// Inverse of RelposExpand's scatter: [B, N, T, T] -> [B, N, T, 2n+1], clipped positions summed.
using RelposReduce = at::Tensor(const at::Tensor& grad, int64_t radius);

}  // namespace cabert::kernels::conv_contract
