// Composite attention (the formula and conventions of kernels/attention_kernels.h) in blocks of query rows
// through ATen: per block of R queries, for every (batch, head) at once, the scores [B N, R, T] come from
// batched products, masked keys get -inf, then a row softmax, Philox dropout with the block's own draws of the
// [B, N, T, T] scheme (kernels/dropout_kernels.h, DrawIndex), and one batched product with V. The backward
// recomputes each block from the saved row log-sum-exp.
//
// The relative terms: beyond the radius a band's entry is its edge entry, so the keys more than n left or right
// of every row of a block take one product each, of [q scale, the query band's edge, 1] with [k, 1, the key
// band's edge, -inf where masked]; only the strip of R + 2n keys around the block's diagonal gathers the bands
// along their diagonals. In the backward those outer parts give the bands' edges plain sums. (One block of the
// whole length is all strip.) On the CPU, B=2 N=4 d=64 n=8 in blocks of 128 rows ran 2.1x faster this way at
// T=4096 than with the bands gathered over every key, 1.2-1.3x at T=1024 (fwd+bwd, 2 cores).
//
// Memory is a few [B N, R, T] blocks: R is T while one block of the whole length holds at most
// `block_elements`, and shrinks beyond, so the extra memory stops growing quadratically there and grows
// linearly in T; the T x T matrix of a long sequence is never built. The products are the BLAS's (cuBLAS on a
// GPU), every other pass is an ATen kernel, nothing is summed with atomics (a run repeats bit for bit).
//
// Device-agnostic: CUDA's path in double, and where kernels/regions does not go (a batch row with no real
// key); its dropout masks are the reference's, so the CUDA tests compare it with the CPU bit for bit. It runs
// the same on the CPU, where the tests check it against the reference and the tiled CPU kernel
// (tests/kernels/attention_chunked_test.cc).
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace cabert::kernels::chunked {

// Elements of one [B N, R, T] block: 2^25 (128 MiB in float; the backward holds about five).
inline constexpr int64_t kBlockElements = int64_t(1) << 25;

// The query rows per block for these sizes: T when one block of B N x T x T fits, else as many as fit (at
// least one, a multiple of 64 from 64 up).
int64_t block_rows(int64_t batch_heads, int64_t length, int64_t block_elements);

// Inputs checked by kernels/attention_kernels.cc; outputs and gradients laid out as its entry points'.
AttentionOutputs relative_attention_forward(const AttentionInputs& in, int64_t block_elements = kBlockElements);
AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward, int64_t block_elements = kBlockElements);

}  // namespace cabert::kernels::chunked
