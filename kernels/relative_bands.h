// Chang et al.'s relative terms between their weights and the [B, N, T, 2n+1] bands the attention kernels
// add (kernels/attention_kernels.h):
//
//   query_band[b, h, i, r] = scale q_bhi.W^C[r] + beta[h, r],   key_band[b, h, j, r] = scale k_bhj.W^K'[r]
//
// Used by the routes that take bands as tensors (the reference and the SDPA fallback through autograd; CUDA's
// regions and blocks once per call, with the weights' gradients from the bands' in the backward). The CPU
// kernel computes the same bands itself, a query tile or a head at a time, and never stores them whole.
#pragma once

#include <ATen/ATen.h>

#include "kernels/attention_types.h"

namespace cabert::kernels {

struct Bands {
  at::Tensor query, key;  // [B, N, T, 2n+1] or undefined
};

// x W^T scale for every (batch, head, position) of x [B, N, T, d] as a [B, N, T, 2n+1] band, two ways:
using BandProduct = at::Tensor (*)(const at::Tensor& x, const at::Tensor& weight, double scale);
// plain ATen (differentiable by autograd: the reference's and the SDPA fallback's);
at::Tensor band_by_matmul(const at::Tensor& x, const at::Tensor& weight, double scale);
// one product over x's storage (no copy of heads-last x), contiguous as the kernels read it.
at::Tensor band_over_storage(const at::Tensor& x, const at::Tensor& weight, double scale);

// The bands of q and k [B, N, T, d], each undefined without its terms.
Bands relative_bands(const at::Tensor& q, const at::Tensor& k, const RelativeWeights& weights, int64_t radius,
                     double scale, BandProduct product = band_over_storage);

// From the bands' gradients in grads (which it leaves undefined): adds their share to grads.q and grads.k (in
// place on heads-last storage where it is laid out so) and sets the weights' gradients, for the terms `in`
// has as weights.
void band_grads_to_weights(const AttentionInputs& in, AttentionGrads& grads);

}  // namespace cabert::kernels
