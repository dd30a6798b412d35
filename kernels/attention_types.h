// The types every route of the composite attention shares with its entry points (kernels/attention_kernels.h has
// the formula, the conventions and the choice of route): the inputs, the outputs a backward takes, the
// gradients, and the heads-last layout of outputs and gradients. A route includes this header, never the
// entry points' (ARCHITECTURE.md: a route is below the dispatcher that chooses it).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "kernels/dropout_draw.h"

namespace cabert::kernels {

// Chang et al.'s weights: query_band = scale q.W^C + beta_h, key_band = scale k.W^K'.
struct RelativeWeights {
  at::Tensor query;  // W^C [2n+1, d] or undefined
  at::Tensor beta;   // [N, 2n+1] or undefined
  at::Tensor key;    // W^K' [2n+1, d] or undefined
  bool any() const { return query.defined() || beta.defined() || key.defined(); }
};

struct AttentionInputs {
  at::Tensor q, k, v;       // [B, N, T, d]; the last dimension contiguous, other strides free
  at::Tensor query_band;    // [B, N, T, 2n+1] or undefined
  at::Tensor key_band;      // [B, N, T, 2n+1] or undefined
  RelativeWeights weights;  // instead of the bands (both at once is a usage error)
  at::Tensor key_mask;      // [B, T] bool (true = real key) or undefined
  int64_t radius = 0;       // n
  double scale = 1;
  DropoutDraw dropout;
  // Under autocast (--amp): its dtype (bfloat16), in which kernels/regions hands PyTorch's fused kernel the
  // regions' operands (tensor cores, as SDPA under autocast), the rest in the inputs' float32. Unset: the
  // inputs' dtype throughout. The other routes ignore it.
  std::optional<at::ScalarType> fused_kernel_dtype;
};

struct AttentionOutputs {
  at::Tensor out;        // [B, N, T, d], stored as [B, T, N, d] (out.transpose(1, 2) is contiguous)
  at::Tensor logsumexp;  // [B, N, T], float or double like q: log sum_j exp(s_ij) over the real keys
  at::Tensor rng;        // the dropout states of kernels/regions' fused regions for its backward, else undefined
  // The bands a route other than the CPU's computed from the weights, for its backward; else undefined.
  at::Tensor query_band, key_band;
  bool tiled = false;  // the forward took kernels/cuda's tiles (`--cuda-attention tiles`): so does the backward
};

struct AttentionGrads {
  at::Tensor q, k, v, query_band, key_band;   // the bands' undefined when the input had none (or had weights)
  at::Tensor query_weight, beta, key_weight;  // the weights', when the input had them
};

// An uninitialised [B, N, T, d] tensor like x on [B, T, N, d] storage: the layout of every route's outputs and
// gradients.
inline at::Tensor heads_last_empty(const at::Tensor& x) {
  return at::empty({x.size(0), x.size(2), x.size(1), x.size(3)}, x.options()).transpose(1, 2);
}
// x [B, N, T, d] copied onto [B, T, N, d] storage.
inline at::Tensor heads_last(const at::Tensor& x) { return heads_last_empty(x).copy_(x); }

}  // namespace cabert::kernels
