// Composite attention (the formula and conventions of kernels/attention_kernels.h) on a fused attention kernel
// that knows no relative positions: PyTorch's own (the memory-efficient attention kernel on CUDA), called on
// the two regions where the relative terms are no longer relative.
//
// Beyond the radius every band entry is its edge entry, so a row's keys fall in three regions:
//   - left, j <= i - n - 1: s_ij = scale q_i.k_j + query_band[i, 0] + key_band[j, 2n]. With the augmented
//     operands [scale q_i, 1, query_band[i, 0]] and [k_j, key_band[j, 2n], 1] (a masked key's entry a large
//     negative number) this is a plain dot product, and the region is causal attention of the queries n+1 .. T-1
//     on the keys 0 .. T-n-2 (query i' = i - n - 1 sees keys j <= i');
//   - right, j >= i + n + 1: the same with the other edges (query_band[i, 2n], key_band[j, 0]), causal once
//     both axes are reversed;
//   - the strip |j - i| <= n: the 2n+1 scores per row gathered from batched products of blocks of query rows
//     with their windows of keys (a few times the band's width, nothing T x T).
// The three partial results combine through their log-sum-exps: lse_i = log(sum over regions of exp(lse_ri)),
// out_i = sum_r exp(lse_ri - lse_i) out_ri. The backward needs no partial results: the fused kernel's
// backward, given the whole row's output and log-sum-exp instead of its region's, computes exactly that
// region's part of the gradients (P = exp(s - lse), dS = P (dP - rowsum(dO out))). The augmented columns'
// gradients are the band edges' gradients.
//
// Both regions go to the kernel in one call, stacked along the batch. Dropout: the kernel draws its own mask
// for them (on CUDA PyTorch's Philox, its generator seeded from the call's seed for the call, so a run repeats
// and resumes exactly), the strip draws kernels/philox.h's mask on its [B, N, T, 2n+1] band. The masks are not
// the reference's [B, N, T, T] scheme (kernels/dropout_kernels.h): `--kernels fused` and `reference` drop
// different probabilities on this path (as on SDPA's). The masks and the forward repeat bit for bit; on CUDA the
// gradients repeat to rounding only: PyTorch's backward may split the keys and sum q's gradient in the order the
// splits finish (unless PyTorch's deterministic algorithms are on).
//
// Memory: the fused kernel's (linear in T) plus the strip's blocks and a few [B, N, T, d + 8] operands.
// A batch row whose keys are all masked (it attends to all of them alike) is not taken: takes() says.
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace cabert::kernels::regions {

// One region's fused attention: causal (key j takes part for query i when j <= i), scale 1, on [B, N, M, e]
// queries and keys and [B, N, M, dv] values. `rng` is the dropout state its backward needs (a backend's own
// format; undefined without dropout). The backward must take `out` and `logsumexp` as given (the whole rows',
// not the region's) and return that region's part of the gradients.
struct RegionForward {
  at::Tensor out, logsumexp, rng;  // out [B, N, M, dv], logsumexp [B, N, M] (any floating dtype)
};
struct RegionGrads {
  at::Tensor q, k, v;
};
struct RegionKernel {
  RegionForward (*forward)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DropoutDraw& draw);
  RegionGrads (*backward)(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& logsumexp, const DropoutDraw& draw,
                          const at::Tensor& rng);
};

// PyTorch's kernel for q's device: on CUDA the memory-efficient attention (float, half, bfloat16; dropout),
// on the CPU its flash attention (float, double; no dropout, and causal costs as much as full there: the CPU
// path of cabert is kernels/cpu's tiled kernel, this one serves the tests).
RegionKernel pytorch_region_kernel(const at::Tensor& q);

// Whether this path takes these (checked) inputs: a dtype the device's kernel computes (float on CUDA, float or
// double on the CPU without dropout) and no batch row without a real key (kernels/key_mask_facts.h: asked of the
// device once per mask).
bool takes(const AttentionInputs& in);

// The draws of a call's parts (the tests rebuild its mask from them): part 1 the regions, both in one call of
// the region kernel, stacked along the batch ([2B, N, M, .]: the left region's rows, then the right one's with
// both axes reversed); part 2 the strip, drawn by kernels/dropout_kernels.h over [B, N, Tp, 2n+1] row-major,
// entry (i, r) for key j = i + r - n, Tp = T rounded up to strip_block_rows(n).
DropoutDraw part_draw(const DropoutDraw& draw, int part);
int64_t strip_block_rows(int64_t radius);

// Inputs checked by kernels/attention_kernels.cc; outputs and gradients laid out as its entry points'. The
// forward's `rng` holds the regions' dropout states for the backward.
AttentionOutputs relative_attention_forward(const AttentionInputs& in, const RegionKernel& kernel);
AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward, const RegionKernel& kernel);

}  // namespace cabert::kernels::regions
