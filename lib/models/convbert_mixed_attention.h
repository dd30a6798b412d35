// ConvBERT mixed attention (Jiang et al. 2020, Eq. 6): bottleneck self-attention (Eq. 1) with
// num_heads / head_ratio heads beside a convolution branch of the same width, concatenated:
//   Mixed-Attn(K, Q, Ks, V; W_f) = Cat(Self-Attn(Q, K, V), SDConv(Q, Ks, V; W_f)).
// The branch is the span-based dynamic convolution by default (Eq. 4-5, lib/ops/span_dynamic_conv.h):
//   Ks = SepConv_k(X), kernel_i = softmax_k(W_f (Q_i * Ks_i)) per head, out_i = sum_j kernel_i[j] V'_{i+j-k/2},
// or one of the ablations of ConvBERT Table 2: plain dynamic convolution (Eq. 3), plain depthwise-separable
// convolution, or none.
// Padding is masked in the attention scores and in every convolution.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/layers.h"
#include "lib/models/mixer.h"

namespace cabert::models {

class MixedAttentionImpl : public Mixer {
 public:
  explicit MixedAttentionImpl(const pb::ModelConfig& config);
  // [B, T, H] -> [B, T, attention width + conv width]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  int64_t output_size() const override { return attention_width + conv_width; }

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  SeparableConv key_conv{nullptr};         // SDConv: Ks; depthwise-separable ablation: the branch itself
  torch::nn::Linear conv_kernel{nullptr};  // W_f: width -> heads * k
  torch::nn::Linear conv_value{nullptr};   // V'
  Dropout attention_dropout{nullptr};
  pb::ConvBertConvKind kind;
  int64_t heads, head_size, attention_width, conv_width, kernel;
};
TORCH_MODULE(MixedAttention);

// Multiply-adds per token of the mixing itself (bottleneck attention, the convolution and its depthwise part).
double mixed_attention_mixing_macs(const pb::ModelConfig& config, int64_t layer_index, int64_t T);

}  // namespace cabert::models
