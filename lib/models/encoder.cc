#include "lib/models/encoder.h"

#include "lib/models/mixer_registry.h"

namespace cabert::models {

EncoderLayerImpl::EncoderLayerImpl(const pb::ModelConfig& config, int64_t layer_index)
    : normalize_mixer_output(config.normalize_mixer_output()), normalize_before(config.seq2seq().normalize_before()) {
  const int64_t H = config.hidden_size();
  const MixerFamily& family = mixer_family(config.family());
  mixer = register_module(family.module_name, family.build(config, layer_index));
  const auto eps = config.layer_norm_eps();
  output = register_module("output", torch::nn::Linear(mixer->output_size(), H));
  attention_norm = register_module("attention_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({H}).eps(eps)));
  const int64_t groups = family.feed_forward_groups ? family.feed_forward_groups(config) : 1;
  ffn = register_module("ffn", FeedForward(H, config.intermediate_size(), groups, config.ffn_activation()));
  ffn_norm = register_module("ffn_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({H}).eps(eps)));
  dropout = register_module("dropout", Dropout(config.dropout()));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  if (normalize_before) {
    torch::Tensor h = x + dropout(output(mixer->forward(attention_norm(x), mask)));
    return h + dropout(ffn(ffn_norm(h)));
  }
  torch::Tensor mixed = dropout(output(mixer->forward(x, mask)));
  torch::Tensor h = normalize_mixer_output ? x + attention_norm(mixed) : attention_norm(x + mixed);
  return ffn_norm(h + dropout(ffn(h)));
}

EncoderStackImpl::EncoderStackImpl(const pb::ModelConfig& config) {
  if (config.embedding_size() != config.hidden_size()) {
    embedding_projection =
        register_module("embedding_projection", torch::nn::Linear(config.embedding_size(), config.hidden_size()));
  }
  for (int64_t i = 0; i < config.num_layers(); ++i) layers->push_back(EncoderLayer(config, i));
  register_module("layers", layers);
}

torch::Tensor EncoderStackImpl::forward(const torch::Tensor& embedded, const torch::Tensor& mask) {
  torch::Tensor x = embedding_projection ? embedding_projection(embedded) : embedded;
  for (auto& layer : *layers) x = layer->as<EncoderLayer>()->forward(x, mask);
  return x;
}

EncoderImpl::EncoderImpl(const pb::ModelConfig& config) : config_(config) {
  embeddings = register_module("embeddings", Embeddings(config));
  stack = register_module("stack", EncoderStack(config));
  // BERT initialisation of linears/embeddings/norms; the variant-specific tensors were initialised by
  // their modules and are not Linear/Embedding/LayerNorm, so they keep their own scheme.
  init_bert_weights(*this, config.initializer_range());
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask) {
  return stack(embeddings(ids, segments), mask);
}

}  // namespace cabert::models
