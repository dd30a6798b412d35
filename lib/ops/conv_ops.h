// The convolution-branch ops of the encoders: the depthwise convolution of Wu et al. Eq. 1 and its
// lightweight (shared softmax kernel) and dynamic (per-position kernel) forms, the depthwise convolution of
// values (Chang et al. Eq. 7) and the banded relative-position terms of composite attention (Eq. 4-6).
// ConvBERT's SDConv is built on dynamic_conv in span_dynamic_conv.h. Models call these and nothing below them.
//
// Each op is one autograd-capable function with a single dispatch point: the kernel path (fused by default,
// `--kernels reference` for debugging) and, on the fused path, the device of x (CPU fused kernel or CUDA
// kernel) pick the implementation. Gradients flow to every tensor argument, float and double.
//
// Layout: batch-first x [B, T, C]; the C channels split into H contiguous head blocks of C/H channels
// (channel c uses head c / (C/H)). mask: optional [B, T] bool, true = real token; masked inputs contribute
// zero and masked outputs are zero; an undefined tensor means no mask. padding_left: K/2 (integer division)
// for centred encoder convs, K-1 for causal decoder convs; output t reads taps t + k - padding_left,
// k = 0..K-1, out-of-range taps read zero; K may exceed T.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "lib/ops/kernel_path.h"

namespace cabert::ops {

// weight [H, K], already softmax-normalised (and DropConnect-ed) by the caller.
torch::Tensor lightweight_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding_left,
                               const torch::Tensor& mask = {});

// Per-position kernels [B, T, H, K], normalised by the caller: out[b, i, c] = sum_j kernels[b, i, h(c), j] *
// x[b, i + j - padding_left, c]. Used by DynamicConv (Wu et al.) and by ConvBERT's SDConv unfold-and-weight
// step.
torch::Tensor dynamic_conv(const torch::Tensor& x, const torch::Tensor& kernels, int64_t padding_left,
                           const torch::Tensor& mask = {});

// Depthwise conv (groups = C) on values: weight [C, K], bias [C] or undefined (added at real positions only).
torch::Tensor depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding_left, const torch::Tensor& mask = {});

// Dilated depthwise conv (Tay et al.'s dilated convolution): out[b, t, c] = sum_k weight[c, k] *
// x[b, t + k * dilation - padding_left, c], masked like the others; padding_left (K-1)*dilation causal, or
// (K-1)*dilation/2 centred. Both kernel paths run ATen's conv1d (groups = C), which already has fast CPU and
// cuDNN depthwise kernels.
torch::Tensor dilated_depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t dilation,
                                     int64_t padding_left, const torch::Tensor& mask = {});

// Banded relative-position score terms of composite attention, to add to the logits before softmax:
//   out[b, h, i, j] = (q[b, h, i, :] . w[r(i, j), :]) * scale + (beta defined ? beta[h, r(i, j)] : 0),
//   r(i, j) = clamp(j - i, -radius, radius) + radius.
// q [B, N, T, d], w [2 radius + 1, d] or undefined (then only beta), beta [N, 2 radius + 1] or undefined
// (not both undefined). Returns [B, N, T, T].
torch::Tensor relative_position_scores(const torch::Tensor& q, const torch::Tensor& w, const torch::Tensor& beta,
                                       int64_t radius, double scale);

}  // namespace cabert::ops
