// Attention with banded relative-position biases (Chang et al. 2021, Eq. 4-6 and the key variant), fused:
//
//   s_ij = scale q_i.k_j + query_band[i, r(i, j)] + key_band[j, r(j, i)],   r(i, j) = clamp(j - i, -n, n) + n
//   p_ij = softmax_j(s_ij) over the real keys j;  out_i = sum_j p_ij z_ij / (1 - p) v_j
//
// with z_ij the Philox dropout draw of kernels/philox.h (1 when dropout is off). The bands are the [T, 2n+1]
// relative terms every query (or key) adds to its row (or column): query_band = scale q.W^C + beta_h and
// key_band = scale k.W^K' (linear in T; below, bands or weights). The fused kernel
// never builds the T x T matrix: it walks key tiles with the online softmax of FlashAttention and keeps
// only the row log-sum-exp for the backward, which recomputes the tiles. Beyond the radius every score of a
// tile row shares one band value, so only the tiles that cross the band pay per element.
//
// Padding: masked keys take no part. A batch row whose keys are all masked attends uniformly to all of them
// (what the reference's additive bias of the dtype's lowest value gives), with zero score gradients.
//
// The relative terms arrive either as the bands themselves (the tests' form: any values) or as their weights
// (the models' form: kernels/relative_bands.h has the bands they give). From weights the CPU kernel computes
// each query tile's band and each head's key band itself while the rows are in cache, and its backward maps
// the bands' gradients to q, k and the weights inside the tiles; the other routes compute the bands once per
// call and map their gradients with ATen products.
//
// Entry points: CPU tensors -> kernels/cpu (float, double); CUDA tensors in a build with CUDA kernels ->
// kernels/regions in float (PyTorch's memory-efficient kernel on the regions beyond the radius, cabert's
// products on the strip inside it; its dropout masks its own, see there), kernels/chunked otherwise (double,
// or a batch row with no real key: blocks of query rows through batched products, linear memory past one
// block, the reference's Philox masks); kernels/cuda's tiles under `--cuda-attention tiles`. The backward takes the
// forward's route (AttentionOutputs::rng is defined on the regions'). The reference (the test oracle) is
// kernels/reference/attention_reference.h; lib/ops hands it the small CUDA problems instead of these entry points
// (CudaAttentionRoute below).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "kernels/attention_types.h"

namespace cabert::kernels {

// CUDA's route: the regions (PyTorch's fused kernel; float only), the blocks (kernels/chunked: the reference's
// dropout masks, slower) or the tiles (kTiles, below). Process-wide (`--cuda-attention`). kAuto, the default, is the
// regions here, and lib/ops hands the problems of at most kAutoScoreEntries score entries (B N T^2) to the reference's
// T x T scores instead (cuda_attention_takes_scores): there launches, not the device, bound the fused routes. Measured
// fwd+bwd at B=8 N=4 d=64 n=8 (recipes/bench/results/gpu-*.md): at T=512 (2^23 entries) the scores took 0.35x the
// regions' time on an H100 and 0.4x on an H200; at T=2048 (2^27) 1.5x and 1.3x. The bound, 2^25 (T=1024 there; about
// 0.5 GiB of score tensors in a fwd+bwd), lies below the crossover these points put near T=1400-1500. kTiles:
// kernels/cuda/attention_cuda_kernels.cuh, one kernel forward and two backward (float and double, head size up to 128,
// the reference's dropout masks; the blocks take what it does not). All four stay (H200, 2026-11-29, fwd+bwd ms at
// T=512 / 2048 / 8192): auto 1.45 / 8.93 / -, regions 4.19 / 9.23 / 94.97, blocks 3.01 / 10.93 / 168.09, tiles
// 1.65 / 20.66 / 272.03. Auto is the fastest or level everywhere; the regions are auto's long-T route; the blocks'
// code is CUDA's double path and the reference's masks in float (tests/gpu); the tiles need the least memory (454
// MiB against the regions' 1999 at T=8192) but are 2.2-2.9x slower from T=2048, so opt-in.
// tests/kernels/attention_cuda_emulated_test.cc runs the tiles' kernels on the CPU.
enum class CudaAttentionRoute { kAuto, kRegions, kBlocks, kTiles };
inline constexpr int64_t kAutoScoreEntries = int64_t(1) << 25;
void set_cuda_attention_route(CudaAttentionRoute route);
CudaAttentionRoute cuda_attention_route();
// "auto", "regions", "blocks" or "tiles"; anything else is a UsageError naming the accepted values.
CudaAttentionRoute parse_cuda_attention_route(const std::string& name);
// True when a CUDA problem of these sizes with relative terms takes the reference's T x T scores: the route is
// kAuto and batch heads length^2 <= kAutoScoreEntries.
bool cuda_attention_takes_scores(int64_t batch, int64_t heads, int64_t length);
// The route for a scope (tests, bench rows), the previous one restored after it.
class ScopedCudaAttentionRoute {
 public:
  explicit ScopedCudaAttentionRoute(CudaAttentionRoute route) : previous_(cuda_attention_route()) {
    set_cuda_attention_route(route);
  }
  ~ScopedCudaAttentionRoute() { set_cuda_attention_route(previous_); }
  ScopedCudaAttentionRoute(const ScopedCudaAttentionRoute&) = delete;
  ScopedCudaAttentionRoute& operator=(const ScopedCudaAttentionRoute&) = delete;

 private:
  CudaAttentionRoute previous_;
};

AttentionOutputs relative_attention_forward(const AttentionInputs& in);
AttentionGrads relative_attention_backward(const at::Tensor& grad_out, const AttentionInputs& in,
                                           const AttentionOutputs& forward);

}  // namespace cabert::kernels
