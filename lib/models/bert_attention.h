// Self-attention with every position/convolution variant of Chang et al. 2021 (SPEC.md section 2):
//   alpha_ij = q_i.k_j/sqrt(d) [+ beta_h[r]] [+ q_i.W^C[r]/sqrt(d)] [+ k_j.W^K'[r(j,i)]/sqrt(d)],
//   r = clamp(j - i, -n, n); softmax over real keys; context = P V [+ s_h DWConv_{2n+1}(V)];
// queries/keys/values of the first half of the heads optionally come from a depthwise-separable conv.
// Returns the merged heads [B, T, H] before the output projection.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/layers.h"

namespace cabert::models {

class BertSelfAttentionImpl : public torch::nn::Module {
 public:
  BertSelfAttentionImpl(const pb::ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  int64_t output_size() const { return hidden; }

  // One projection: Linear(H->H), or [SepConv(H->H/2) | Linear(H->H/2)] when convolutional.
  torch::Tensor project(const torch::Tensor& x, const torch::Tensor& mask, torch::nn::Linear& linear,
                        SeparableConv& conv);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  SeparableConv query_conv{nullptr}, key_conv{nullptr}, value_conv{nullptr};
  torch::Tensor relative_beta;      // [N, 2n+1]
  torch::Tensor relative_query;     // W^C [2n+1, d]
  torch::Tensor relative_key;       // W^K' [2n+1, d]
  torch::Tensor depthwise_weight, depthwise_bias, depthwise_scale;  // [H, 2n+1], [H], [N]
  torch::nn::Dropout attention_dropout{nullptr};
  int64_t hidden, heads, head_size, radius;
};
TORCH_MODULE(BertSelfAttention);

}  // namespace cabert::models
