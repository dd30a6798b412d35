// The convolution-branch ops of the encoders (lightweight, dynamic, span-based dynamic (SDConv), depthwise
// convolution and the banded relative-position terms of composite attention). Models call these and nothing
// below them.
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

namespace cabert::ops {

enum class KernelPath { kFused, kReference };

// Process-wide; set once from the command line (--kernels fused|reference) before any model runs.
void set_kernel_path(KernelPath path);
KernelPath kernel_path();
// "fused" or "reference"; anything else is a UsageError naming the accepted values.
KernelPath parse_kernel_path(const std::string& name);
std::string kernel_path_name(KernelPath path);

// Sets the process-wide kernel path for one scope and restores the previous one on exit (also on exceptions).
class ScopedKernelPath {
 public:
  explicit ScopedKernelPath(KernelPath path) : previous_(kernel_path()) { set_kernel_path(path); }
  ~ScopedKernelPath() { set_kernel_path(previous_); }
  ScopedKernelPath(const ScopedKernelPath&) = delete;
  ScopedKernelPath& operator=(const ScopedKernelPath&) = delete;

 private:
  KernelPath previous_;
};

// weight [H, K], already softmax-normalised (and DropConnect-ed) by the caller.
torch::Tensor lightweight_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t padding_left,
                               const torch::Tensor& mask = {});

// Per-position kernels [B, T, H, K], normalised by the caller: out[b, i, c] = sum_j kernels[b, i, h(c), j] *
// x[b, i + j - padding_left, c]. Used by DynamicConv (Wu et al.) and by ConvBERT's SDConv unfold-and-weight
// step.
torch::Tensor dynamic_conv(const torch::Tensor& x, const torch::Tensor& kernels, int64_t padding_left,
                           const torch::Tensor& mask = {});

// ConvBERT's span-based dynamic convolution (Jiang et al. 2020, eq. 5):
//   SDConv(Q, Ks, V) = dynamic_conv(V, softmax_K(W_f (Q * Ks) + b_f), padding_left, mask),
// q, key_span (the span-aware key, SepConv_K of the input) and v [B, T, C]; kernel_weight W_f [heads * K, C],
// kernel_bias [heads * K] or undefined. The kernel generation is ATen (a small matmul and a softmax) on both
// paths; the unfold-and-weight step is dynamic_conv's.
torch::Tensor span_dynamic_conv(const torch::Tensor& q, const torch::Tensor& key_span, const torch::Tensor& v,
                                const torch::Tensor& kernel_weight, const torch::Tensor& kernel_bias, int64_t heads,
                                int64_t padding_left, const torch::Tensor& mask = {});

// Depthwise conv (groups = C) on values: weight [C, K], bias [C] or undefined (added at real positions only).
torch::Tensor depthwise_conv(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             int64_t padding_left, const torch::Tensor& mask = {});

// Banded relative-position score terms of composite attention, to add to the logits before softmax:
//   out[b, h, i, j] = (q[b, h, i, :] . w[r(i, j), :]) * scale + (beta defined ? beta[h, r(i, j)] : 0),
//   r(i, j) = clamp(j - i, -radius, radius) + radius.
// q [B, N, T, d], w [2 radius + 1, d] or undefined (then only beta), beta [N, 2 radius + 1] or undefined
// (not both undefined). Returns [B, N, T, T].
torch::Tensor relative_position_scores(const torch::Tensor& q, const torch::Tensor& w, const torch::Tensor& beta,
                                       int64_t radius, double scale);

}  // namespace cabert::ops
