// Encoders with their pre-training heads. Both register the encoder as "encoder" so that fine-tuning can
// load the "encoder." tensors of either checkpoint.
//   MLM:     Linear(H->E), GELU, LN(E), then logits against the tied token embedding plus a bias (V).
//   ELECTRA: a generator (same depth, hidden/heads/intermediate divided by electra.generator_divisor) that
//            shares the discriminator's embeddings (token, segment, position, LN) and has its own E->H_g
//            projection and tied MLM head; the discriminator head is Linear(H->H), GELU, Linear(H->1).
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/encoder.h"

namespace cabert::models {

class MlmHeadImpl : public torch::nn::Module {
 public:
  MlmHeadImpl(int64_t hidden, int64_t embedding, int64_t vocab, double eps);
  // hidden [M, H], tied token embedding [V, E] -> logits [M, V]
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& token_embedding);
  torch::nn::Linear transform{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::Tensor bias;
};
TORCH_MODULE(MlmHead);

struct MlmOutput {
  torch::Tensor logits;  // [M, V] at the selected positions
};

class MlmModelImpl : public torch::nn::Module {
 public:
  explicit MlmModelImpl(const pb::ModelConfig& config);
  // positions: bool [B, T] where to predict. Returns logits [M, V] in row-major order of `positions`.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask,
                        const torch::Tensor& positions);
  Encoder encoder{nullptr};
  MlmHead mlm_head{nullptr};
};
TORCH_MODULE(MlmModel);

// The generator's config: same depth and family, hidden/heads/intermediate divided by the divisor (at
// least one head), same embedding size.
pb::ModelConfig generator_config(const pb::ModelConfig& config);

class ElectraModelImpl : public torch::nn::Module {
 public:
  explicit ElectraModelImpl(const pb::ModelConfig& config);
  // Generator MLM logits [M, V] at `positions` for the masked input.
  torch::Tensor generator_logits(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask,
                                 const torch::Tensor& positions);
  // Discriminator replaced-token logits [B, T].
  torch::Tensor discriminator_logits(const torch::Tensor& ids, const torch::Tensor& segments,
                                     const torch::Tensor& mask);
  Encoder encoder{nullptr};  // the discriminator
  EncoderStack generator{nullptr};
  MlmHead generator_head{nullptr};
  torch::nn::Linear discriminator_dense{nullptr}, discriminator_out{nullptr};
};
TORCH_MODULE(ElectraModel);

}  // namespace cabert::models
