// The convolution block of Wu et al. 2019 as a token mixer: Linear(d->2d) + GLU (or Linear(d->d)), then a
// lightweight conv (one softmax-normalised kernel [H, k] shared by the d/H channels of each head,
// DropConnect on the normalised kernel) or a dynamic conv (kernel_i = softmax_k(W^Q X_i) per head).
// The encoder layer applies the output Linear(d->d), residual and LayerNorm around it.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"

namespace cabert::models {

class ConvBlockImpl : public torch::nn::Module {
 public:
  ConvBlockImpl(const pb::ModelConfig& config, int64_t layer_index);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  int64_t output_size() const { return hidden; }

  torch::nn::Linear input{nullptr};
  torch::Tensor weight;                        // lightweight: [H, k]
  torch::nn::Linear kernel_projection{nullptr};  // dynamic: W^Q, d -> H k (no bias, as fairseq)
  bool dynamic, glu;
  double weight_dropout;
  int64_t hidden, heads, kernel, padding_left;
};
TORCH_MODULE(ConvBlock);

}  // namespace cabert::models
