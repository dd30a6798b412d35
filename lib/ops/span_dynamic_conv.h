// ConvBERT's span-based dynamic convolution (Jiang et al. 2020, Eq. 4-5), the convolution half of mixed
// attention:
//   SDConv(Q, Ks, V) = dynamic_conv(V, softmax_K(W_f (Q * Ks) + b_f), padding_left, mask),
// q, key_span (the span-aware key, SepConv_K of the input) and v [B, T, C]; kernel_weight W_f [heads * K, C],
// kernel_bias [heads * K] or undefined. The kernel generation is ATen (a small matmul and a softmax) on both
// paths; the unfold-and-weight step is dynamic_conv's.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::ops {

torch::Tensor span_dynamic_conv(const torch::Tensor& q, const torch::Tensor& key_span, const torch::Tensor& v,
                                const torch::Tensor& kernel_weight, const torch::Tensor& kernel_bias, int64_t heads,
                                int64_t padding_left, const torch::Tensor& mask = {});

}  // namespace cabert::ops
