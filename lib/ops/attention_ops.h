// Self-attention of the BERT-style encoders, with or without Chang et al.'s relative-position terms
// (composite attention, SPEC.md section 2; formula in kernels/attention_kernels.h):
//
//   s_ij = q_i.k_j / sqrt(d) + q_i.W^C[r(i, j)] / sqrt(d) + beta_h[r(i, j)] + k_j.W^K'[r(j, i)] / sqrt(d)
//
// with r = clamp(j - i, -n, n) + n, a softmax over the real keys, dropout on the probabilities, times V.
// One dispatch point:
//   - `--kernels reference`, or when the caller wants the probabilities (the pictures): plain ATen with the
//     T x T matrix (kernels/reference/attention_reference.h);
//   - fused, no relative terms: at::scaled_dot_product_attention (PyTorch's own flash / memory-efficient
//     kernels on CPU and CUDA), except on the CPU with dropout, which PyTorch's CPU flash kernel does not take
//     (SDPA would run its quadratic math path): cabert's CPU kernel then. SDPA's dropout masks are PyTorch's
//     own, so on CUDA in training this path and the reference drop different probabilities; each call still
//     draws the one seed the other paths draw, so every dropout after it keeps its mask;
//   - fused, relative terms (or none, on the CPU with dropout): cabert's kernels (kernels/cpu: tiled online
//     softmax, Philox dropout regenerated in the backward; on CUDA in float kernels/regions: PyTorch's
//     memory-efficient kernel on the two regions beyond the radius, where the relative terms are constants
//     of the row and of the key, and banded products on the strip inside it, its dropout masks its own; on
//     CUDA in double kernels/chunked: blocks of query rows through batched products; under `--cuda-attention
//     tiles` kernels/cuda's tiled kernels), nothing T x T;
//   - fused, relative terms, CUDA in a build without CUDA kernels: PyTorch's SDPA with the relative terms as
//     an additive float bias (the one T x T tensor).
// The relative terms enter the kernels as [B, N, T, 2n+1] bands (linear in T). On the kernel path the kernels
// take the weights and form the bands themselves (the CPU kernel a query tile or a head at a time, mapping
// their gradients to q, k and the weights inside its tiles; the CUDA routes with one product over q's and k's
// storage each way); elsewhere the bands and their gradients go through autograd.
// Under autocast (--amp) the relative path runs in float32, like the convolution ops
// (lib/ops/mixed_precision.h), except for the regions' PyTorch kernel on CUDA, which takes autocast's bfloat16
// as SDPA does; the plain path runs SDPA under autocast.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace cabert::ops {

struct RelativePositionTerms {
  torch::Tensor query_weight;  // W^C [2n+1, d] or undefined
  torch::Tensor beta;          // [N, 2n+1] or undefined
  torch::Tensor key_weight;    // W^K' [2n+1, d] or undefined
  int64_t radius = 0;          // n
  bool any() const { return query_weight.defined() || beta.defined() || key_weight.defined(); }
};

// q, k, v [B, N, T, d]; mask [B, T] bool (true = real key) or undefined; dropout_p > 0 only in training.
// Returns the context [B, N, T, d] (on the fused CPU path stored heads-last, so transpose(1, 2) is free).
// `probabilities`, when not null, receives the softmax [B, N, T, T] before dropout (reference path).
torch::Tensor composite_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const RelativePositionTerms& relative, const torch::Tensor& mask, double scale,
                                  double dropout_p, torch::Tensor* probabilities = nullptr);

}  // namespace cabert::ops
