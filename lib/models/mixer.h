// The token mixer of a layer: the one module that moves information between positions. Everything else in
// a layer (output projection, residuals, LayerNorms, FFN) is the same for every family, so a paper's idea
// lives in exactly one mixer file:
//   composite_attention        Chang et al. 2021, self-attention with relative terms (Eq. 4-7)
//   convbert_mixed_attention   Jiang et al. 2020, bottleneck attention + SDConv (Eq. 6)
//   light_dynamic_conv_block   Wu et al. 2019, LightConv / DynamicConv blocks (Eq. 2-4)
// The families are listed, with how to build each, in mixer_registry.cc (an explicit table).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace cabert::models {

// What a mixer keeps between the steps of incremental decoding, one per layer and sequence batch: a causal
// convolution its last k-1 inputs (O(k) per sequence, whatever the length decoded so far), attention its keys
// and values. Beam search reorders it when it keeps, drops or duplicates hypotheses.
struct MixerState {
  torch::Tensor inputs;        // causal convolutions: [N, k-1, C], oldest first
  torch::Tensor keys, values;  // attention caches: [N, heads, steps, head size]
  // Keeps rows `index` (int64 [N']) of every cached tensor, in that order.
  void reorder(const torch::Tensor& index);
};

// What a mixer shows when asked, for the pictures of the papers (lib/pictures): with `Mixer::probe` set, forward()
// stores (detached) its attention probabilities [B, heads, T, T] and, for dynamic convolutions, the kernels it
// generated [B, T, heads, K] (softmax-normalised, before weight dropout).
struct MixerProbe {
  torch::Tensor attention;
  torch::Tensor conv_kernels;
};

class Mixer : public torch::nn::Module {
 public:
  // x [B, T, H], mask bool [B, T] (true = real token; undefined = no padding) -> [B, T, output_size()].
  // Padding positions are masked in every branch.
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) = 0;
  // Width of the mixed output (the layer projects it back to the hidden size).
  virtual int64_t output_size() const = 0;

  // Incremental decoding, for mixers that only look back (causal convolutions, masked self-attention):
  // x_t [N, 1, H] is the next position of every sequence; returns the same [N, 1, output_size()] that
  // forward() gives at that position for the whole prefix, and updates `state`. A bidirectional (encoder)
  // mixer cannot decode step by step: the default says so with a UsageError.
  virtual bool decodes_incrementally() const { return false; }
  virtual torch::Tensor forward_step(const torch::Tensor& x_t, MixerState& state);

  MixerProbe* probe = nullptr;  // not owned; null = record nothing
};

}  // namespace cabert::models
