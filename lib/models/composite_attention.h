// Composite attention: self-attention with every position/convolution variant of Chang et al. 2021 (SPEC.md
// section 2), as numbered in the paper:
//   Eq. 1  alpha_ij = q_i.k_j/sqrt(d)                       (absolute / none)
//   Eq. 4           + beta_h[r]                              (fixed lightweight convolution, Raffel/T5)
//   Eq. 5           + q_i.W^C[r]/sqrt(d)                     (dynamic lightweight convolution, Shaw)
//   Eq. 6           + q_i.W^C[r]/sqrt(d) + beta_h[r]         (composite)
//   key variant     + k_j.W^K'[r(j,i)]/sqrt(d)
//   Eq. 7  context = P V + s_h DWConv_{2n+1}(V)              (fixed depthwise convolution of the values)
// with r = clamp(j - i, -n, n) and a softmax over the real keys; queries/keys/values of the first half of the
// heads optionally come from a depthwise-separable convolution (section 5). Returns the merged heads
// [B, T, H] before the layer's output projection.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/layers.h"
#include "lib/models/mixer.h"
#include "lib/models/relative_position_bias.h"

namespace cabert::models {

class BertSelfAttentionImpl : public Mixer {
 public:
  BertSelfAttentionImpl(const pb::ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  int64_t output_size() const override { return hidden; }

  // One projection: Linear(H->H), or [SepConv(H->H/2) | Linear(H->H/2)] when convolutional.
  torch::Tensor project(const torch::Tensor& x, const torch::Tensor& mask, torch::nn::Linear& linear,
                        SeparableConv& conv);
  // T5's positions: the stack's one bias table (owned and registered by the model, so its parameters are counted
  // and stepped once) takes the place of this layer's relative beta, with the radius of its maximum distance.
  void share_position_bias(RelativePositionBias bias);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  SeparableConv query_conv{nullptr}, key_conv{nullptr}, value_conv{nullptr};
  torch::Tensor relative_beta;                                      // [N, 2n+1]
  torch::Tensor relative_query;                                     // W^C [2n+1, d]
  torch::Tensor relative_key;                                       // W^K' [2n+1, d]
  torch::Tensor depthwise_weight, depthwise_bias, depthwise_scale;  // [H, 2n+1], [H], [N]
  Dropout attention_dropout{nullptr};
  RelativePositionBias shared_position_bias{nullptr};  // not registered here: see share_position_bias
  int64_t hidden, heads, head_size, radius;
};
TORCH_MODULE(BertSelfAttention);

// Multiply-adds per token of the mixing itself (QK^T and AV, the relative and convolution terms).
double self_attention_mixing_macs(const pb::ModelConfig& config, int64_t layer_index, int64_t T);

}  // namespace cabert::models
