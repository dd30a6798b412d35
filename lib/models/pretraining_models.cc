#include "lib/models/pretraining_models.h"

namespace cabert::models {

MlmHeadImpl::MlmHeadImpl(int64_t hidden, int64_t embedding, int64_t vocab, double eps) {
  transform = register_module("transform", torch::nn::Linear(hidden, embedding));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({embedding}).eps(eps)));
  bias = register_parameter("bias", torch::zeros({vocab}));
}

torch::Tensor MlmHeadImpl::forward(const torch::Tensor& hidden, const torch::Tensor& token_embedding) {
  return torch::nn::functional::linear(norm(torch::gelu(transform(hidden))), token_embedding, bias);
}

MlmModelImpl::MlmModelImpl(const pb::ModelConfig& config) {
  encoder = register_module("encoder", Encoder(config));
  mlm_head = register_module(
      "mlm_head", MlmHead(config.hidden_size(), config.embedding_size(), config.vocab_size(), config.layer_norm_eps()));
  init_bert_weights(*mlm_head, config.initializer_range());
}

torch::Tensor MlmModelImpl::forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask,
                                    const torch::Tensor& positions) {
  torch::Tensor hidden = encoder(ids, segments, mask);
  return mlm_head(hidden.index({positions}), encoder->embeddings->token_weight());
}

pb::ModelConfig generator_config(const pb::ModelConfig& config) {
  pb::ModelConfig g = config;
  const int divisor = std::max(1, config.electra().generator_divisor());
  int heads = std::max(1, config.num_heads() / divisor);
  const int hidden = std::max(1, config.hidden_size() / divisor);
  while (hidden % heads != 0) --heads;
  g.set_name(config.name() + "/generator");
  g.set_num_heads(heads);
  g.set_hidden_size(hidden);
  g.set_intermediate_size(std::max(1, config.intermediate_size() / divisor));
  if (g.family() == pb::CONVBERT) {
    int groups = std::max(1, g.convbert().ffn_groups());
    if (g.hidden_size() % groups || g.intermediate_size() % groups) g.mutable_convbert()->set_ffn_groups(1);
  }
  return g;
}

ElectraModelImpl::ElectraModelImpl(const pb::ModelConfig& config) {
  encoder = register_module("encoder", Encoder(config));
  pb::ModelConfig g = generator_config(config);
  generator = register_module("generator", EncoderStack(g));
  // The stack projects E -> H_g (the shared embeddings keep the discriminator's E).
  generator_head = register_module("generator_head",
                                   MlmHead(g.hidden_size(), g.embedding_size(), g.vocab_size(), g.layer_norm_eps()));
  discriminator_dense =
      register_module("discriminator_dense", torch::nn::Linear(config.hidden_size(), config.hidden_size()));
  discriminator_out = register_module("discriminator_out", torch::nn::Linear(config.hidden_size(), 1));
  init_bert_weights(*generator, config.initializer_range());
  init_bert_weights(*generator_head, config.initializer_range());
  init_bert_weights(*discriminator_dense, config.initializer_range());
  init_bert_weights(*discriminator_out, config.initializer_range());
}

torch::Tensor ElectraModelImpl::generator_logits(const torch::Tensor& ids, const torch::Tensor& segments,
                                                 const torch::Tensor& mask, const torch::Tensor& positions) {
  torch::Tensor hidden = generator(encoder->embeddings(ids, segments), mask);
  return generator_head(hidden.index({positions}), encoder->embeddings->token_weight());
}

torch::Tensor ElectraModelImpl::discriminator_logits(const torch::Tensor& ids, const torch::Tensor& segments,
                                                     const torch::Tensor& mask) {
  torch::Tensor hidden = encoder(ids, segments, mask);
  return discriminator_out(torch::gelu(discriminator_dense(hidden))).squeeze(-1);
}

}  // namespace cabert::models
