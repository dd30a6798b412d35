// One post-LN decoder layer of an encoder-decoder (SPEC.md section 6; fairseq's LightConvDecoderLayer and
// TransformerDecoderLayer with normalize_before=false):
//   h = LN(x + Drop(Out(Mix(x))))                    Mix: a causal mixer (conv block or causal attention)
//   c = LN(h + Drop(CrossOut(CrossAttn(h, memory))))  encoder-decoder attention over the source
//   y = LN(c + Drop(FFN(c)))
// (Tay et al.'s blocks, normalize_mixer_output: h = x + LN(Drop(Out(Mix(x))))), or pre-LN with normalize_before
// (fairseq's normalize_before=true, the same LayerNorm modules):
//   h = x + Drop(Out(Mix(LN(x)))),  c = h + Drop(CrossOut(CrossAttn(LN(h), memory))),  y = c + Drop(FFN(LN(c)))
// and the same one position at a time for generation, with the mixer's state and the cached source.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lib/models/decoder_attention.h"
#include "lib/models/layers.h"
#include "lib/models/mixer.h"

namespace cabert::models {

struct DecoderLayerSizes {
  int64_t hidden = 0, heads = 0, intermediate = 0;
  double dropout = 0, attention_dropout = 0, layer_norm_eps = 1e-5;
  bool normalize_mixer_output = false;  // Tay et al.: h = x + LN(Drop(Out(Mix(x))))
  bool normalize_before = false;        // pre-LN sublayers (overrides normalize_mixer_output)
  pb::FfnActivation ffn_activation = pb::GELU;
};

// The state one layer keeps while decoding: its mixer's (conv inputs or self-attention K/V) and the
// projected source of the cross-attention.
struct DecoderLayerState {
  MixerState self, cross;
  void reorder(const torch::Tensor& index) {
    self.reorder(index);
    cross.reorder(index);
  }
};

class DecoderLayerImpl : public torch::nn::Module {
 public:
  // `mixer` must decode incrementally (causal); it is registered as `mixer_name` (the tensor-name prefix).
  DecoderLayerImpl(std::shared_ptr<Mixer> mixer, const std::string& mixer_name, const DecoderLayerSizes& sizes);
  // x [N, T, H], target_mask [N, T] or undefined, memory [N, S, H], memory_mask [N, S] or undefined.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& target_mask, const torch::Tensor& memory,
                        const torch::Tensor& memory_mask);
  // Before the first step: projects the encoder output for the cross-attention.
  void start_decoding(const torch::Tensor& memory, DecoderLayerState& state);
  // x_t [N, 1, H] -> [N, 1, H], equal to forward() at that position of the prefix.
  torch::Tensor forward_step(const torch::Tensor& x_t, const torch::Tensor& memory_mask, DecoderLayerState& state);

  std::shared_ptr<Mixer> mixer;
  torch::nn::Linear output{nullptr}, cross_output{nullptr};
  CrossAttention cross_attention{nullptr};
  torch::nn::LayerNorm mixer_norm{nullptr}, cross_norm{nullptr}, ffn_norm{nullptr};
  FeedForward ffn{nullptr};
  Dropout dropout{nullptr};
  bool normalize_mixer_output, normalize_before;

 private:
  // The mixer sublayer around `mix` (the mixer's forward or forward_step on the input it is given).
  template <typename Mix>
  torch::Tensor mixer_sublayer(const torch::Tensor& x, Mix&& mix);
  template <typename Attend>
  torch::Tensor cross_sublayer(const torch::Tensor& h, Attend&& attend);
  torch::Tensor ffn_sublayer(const torch::Tensor& c);
};
TORCH_MODULE(DecoderLayer);

}  // namespace cabert::models
