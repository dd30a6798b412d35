// The convolution block of Wu et al. 2019 as a token mixer: Linear(d->2d) + GLU (or Linear(d->d)), then, as
// numbered in the paper,
//   Eq. 2-3  LightConv: one softmax-normalised kernel W in R^{H x k} shared by the d/H channels of each head
//            (channel c uses row ceil(cH/d)), DropConnect on the normalised kernel;
//   Eq. 4    DynamicConv: the kernel of position i is softmax_k(W^Q X_i), W^Q in R^{(H k) x d};
// over the depthwise convolution of Eq. 1 (lib/ops/conv_ops.h), centred (padding k/2) or causal (k-1).
// Tay et al. 2021's gated block X1 = W^I X * sigmoid(W^S X), X2 = Conv(X1) is the same block with the GLU on
// (GLU(a, b) = a * sigmoid(b)); its third conv kind lives here too:
//   dilated  a plain depthwise kernel per channel (no softmax, no sharing) with dilation 2^(i mod cycle) in
//            layer i (conv_block.dilation_cycle), centred or causal; state: the last (k-1)*dilation inputs.
// The layer applies the output Linear(d->d) (Tay's W^O), residual and LayerNorm around it.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/mixer.h"

namespace cabert::models {

class ConvBlockImpl : public Mixer {
 public:
  ConvBlockImpl(const pb::ModelConfig& config, int64_t layer_index);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  int64_t output_size() const override { return hidden; }
  // Causal blocks (padding (k-1)*dilation) decode step by step: the state keeps the last (k-1)*dilation
  // convolution inputs.
  bool decodes_incrementally() const override { return causal; }
  torch::Tensor forward_step(const torch::Tensor& x_t, MixerState& state) override;

  torch::nn::Linear input{nullptr};
  torch::Tensor weight;                          // lightweight: [H, k]; dilated: [C, k]
  torch::nn::Linear kernel_projection{nullptr};  // dynamic: W^Q, d -> H k (no bias, as fairseq)
  bool dynamic, dilated, glu, causal;
  double weight_dropout;
  int64_t hidden, heads, kernel, dilation = 1, padding_left;
};
TORCH_MODULE(ConvBlock);

// Dilation of layer `layer_index` of a DILATEDCONV stack (1 for the other families).
int64_t conv_dilation(const pb::ModelConfig& config, int64_t layer_index);

// Multiply-adds per token of the convolution of layer `layer_index` (k per channel).
double conv_block_mixing_macs(const pb::ModelConfig& config, int64_t layer_index, int64_t T);

}  // namespace cabert::models
