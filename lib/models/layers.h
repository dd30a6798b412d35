// Building blocks shared by the encoders: embeddings, (grouped) feed-forward, padding-mask helpers and
// parameter initialisation.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"

namespace cabert::models {

// torch::nn::Dropout's role with Philox masks (lib/ops/dropout_ops.h): regenerated in the backward rather
// than stored, the same on every device and under either kernel path.
class DropoutImpl : public torch::nn::Module {
 public:
  explicit DropoutImpl(double p) : p(p) {}
  torch::Tensor forward(const torch::Tensor& x);
  // p in training, 0 in evaluation: what forward applies (fused kernels that drop inside take this).
  double active_p() const { return is_training() ? p : 0.0; }
  double p;
};
TORCH_MODULE(Dropout);

// Token (V x E) + segment (2 x E) [+ absolute position (P x E)], LayerNorm, dropout. The projection to the
// hidden size belongs to the encoder (the ELECTRA generator shares these embeddings but projects to its own
// width).
class EmbeddingsImpl : public torch::nn::Module {
 public:
  explicit EmbeddingsImpl(const pb::ModelConfig& config);
  // ids/segments int64 [B, T] -> [B, T, E]
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segments);
  const torch::Tensor& token_weight() const { return token->weight; }

  torch::nn::Embedding token{nullptr}, segment{nullptr}, position{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  Dropout dropout{nullptr};
  int64_t max_length;
};
TORCH_MODULE(Embeddings);

// Linear split into g independent groups (ConvBERT's grouped FFN): weight [g, in/g, out/g], bias [out].
class GroupedLinearImpl : public torch::nn::Module {
 public:
  GroupedLinearImpl(int64_t in, int64_t out, int64_t groups);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  int64_t groups;
};
TORCH_MODULE(GroupedLinear);

// Linear(H->I), activation (config.ffn_activation: GELU, or fairseq's ReLU), Linear(I->H); grouped when
// groups > 1.
class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(int64_t hidden, int64_t intermediate, int64_t groups, pb::FfnActivation activation = pb::GELU);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::Linear in{nullptr}, out{nullptr};
  GroupedLinear grouped_in{nullptr}, grouped_out{nullptr};
  pb::FfnActivation activation;

 private:
  torch::Tensor activate(const torch::Tensor& x) const;
};
TORCH_MODULE(FeedForward);

// Depthwise conv over all input channels (kernel K, centred, padding masked) then a pointwise Linear:
// the convolutional Q/K/V projections of Chang et al. section 5 (with GELU in between) and ConvBERT's
// SepConv (without).
class SeparableConvImpl : public torch::nn::Module {
 public:
  SeparableConvImpl(int64_t in, int64_t out, int64_t kernel, bool depthwise_bias, bool gelu);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);
  torch::Tensor depthwise_weight, depthwise_bias;
  torch::nn::Linear pointwise{nullptr};
  int64_t kernel;
  bool gelu;
};
TORCH_MODULE(SeparableConv);

// Additive bias for attention logits: 0 for real keys, the dtype's lowest value for padding. [B,1,1,T].
torch::Tensor key_padding_bias(const torch::Tensor& mask, torch::ScalarType dtype);

// BERT initialisation: Linear/Embedding weights ~ N(0, range), biases 0, LayerNorm 1/0. Modules with
// their own scheme (relative terms, conv kernels) initialise themselves afterwards.
void init_bert_weights(torch::nn::Module& module, double range);

}  // namespace cabert::models
