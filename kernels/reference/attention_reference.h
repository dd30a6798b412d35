// Plain-ATen attention with banded relative-position biases: the formula of kernels/attention_kernels.h
// written out with the T x T score matrix (the test oracle of the fused kernel and the `--kernels
// reference` path). Differentiates through ATen autograd. Dropout uses the same Philox keep-mask as the
// fused kernel, so the two agree with dropout on.
#pragma once

#include "kernels/attention_types.h"

namespace cabert::kernels::reference {

// The additive score terms [B, N, T, T]: the bands spread over their diagonals plus the key-padding bias (the
// dtype's lowest value at masked keys); undefined when the inputs have neither.
at::Tensor relative_attention_bias(const AttentionInputs& in);

// out [B, N, T, d]; `probabilities`, when given, receives the softmax before dropout [B, N, T, T].
at::Tensor relative_attention(const AttentionInputs& in, at::Tensor* probabilities = nullptr);

}  // namespace cabert::kernels::reference
