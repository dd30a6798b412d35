// The fused CPU kernel of attention with banded relative-position biases (kernels/attention_kernels.h has the
// formula and the contract). Inputs arrive checked (kernels/attention_kernels.cc): q, k, v [B, N, T, d] of
// one dtype (float or double) with a contiguous last dimension, bands contiguous [B, N, T, 2n+1] or undefined
// (or the weights, contiguous, instead), key_mask contiguous [B, T] bool or undefined.
//
// From weights: the forward computes every head's key band first ([B, N, T, 2n+1], one product per head over
// k's rows) and each query tile's band in its task; the backward computes its head's key band and each query
// tile's band in scratch, and maps their gradients to dq (after the tile's key tiles, while dq's rows are in
// cache), dk (after the head) and the weights (per-(batch, head) slots summed in a fixed order at the end).
//
// Memory: per thread, one query tile of scores and accumulators; nothing T x T. The forward runs the
// (batch, head, query tile) triples in parallel; the backward runs (batch, head) pairs in parallel, each
// walking query tiles (accumulating their dQ) and, inside, key tiles (accumulating into the dK, dV and band
// gradient rows of the head it owns).
#pragma once

#include "kernels/attention_types.h"

namespace cabert::kernels::cpu {

AttentionOutputs relative_attention_forward(const AttentionInputs& in);
AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward);

}  // namespace cabert::kernels::cpu
