// The attention of an encoder-decoder's decoder layer (Vaswani et al. 2017, Eq. 1; the Transformer baseline
// of Wu et al. 2019 and Tay et al. 2021), with the caches of incremental decoding:
//   CausalSelfAttention: softmax(Q K^T / sqrt(d) + causal mask [+ T5's position bias]) V, position i attends to
//                        j <= i; a Mixer,
//                        so it plugs into the mixer registry as a decoder mixer; its state caches K and V.
//   CrossAttention:      queries from the decoder, keys and values from the encoder output (padding
//                        masked); keys and values are projected once per source sentence and cached.
// Both return the merged heads [N, T, H] before the layer's output projection, like every mixer.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "lib/models/layers.h"
#include "lib/models/mixer.h"
#include "lib/models/relative_position_bias.h"

namespace cabert::models {

class CausalSelfAttentionImpl : public Mixer {
 public:
  CausalSelfAttentionImpl(int64_t hidden, int64_t heads, double attention_dropout);
  // x [N, T, H]; mask [N, T] (true = real) or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  int64_t output_size() const override { return hidden; }
  bool decodes_incrementally() const override { return true; }
  torch::Tensor forward_step(const torch::Tensor& x_t, MixerState& state) override;

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  Dropout attention_dropout{nullptr};
  // T5's positions: the decoder's one bias table (owned and registered by the model), added to the logits of
  // every position against every earlier one; none by default.
  RelativePositionBias position_bias{nullptr};
  int64_t hidden, heads, head_size;
};
TORCH_MODULE(CausalSelfAttention);

class CrossAttentionImpl : public torch::nn::Module {
 public:
  CrossAttentionImpl(int64_t hidden, int64_t heads, double attention_dropout);
  // x [N, T, H] (decoder), memory [N, S, H] (encoder output), memory_mask [N, S] or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_mask);
  // Projects the encoder output into state.keys / state.values once per source (before the first step).
  void cache_memory(const torch::Tensor& memory, MixerState& state);
  // One decoder position x_t [N, 1, H] against the cached memory.
  torch::Tensor forward_step(const torch::Tensor& x_t, const torch::Tensor& memory_mask, const MixerState& state);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  Dropout attention_dropout{nullptr};
  int64_t hidden, heads, head_size;
};
TORCH_MODULE(CrossAttention);

}  // namespace cabert::models
