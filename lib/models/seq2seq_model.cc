#include "lib/models/seq2seq_model.h"

#include <cmath>
#include <string>

#include "lib/core/errors.h"
#include "lib/models/composite_attention.h"
#include "lib/models/decoder_attention.h"
#include "lib/models/mixer_registry.h"
#include "lib/models/sinusoidal_positions.h"

namespace cabert::models {
namespace {

bool ends_with(const std::string& name, const std::string& tail) {
  return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

// fairseq's initialisation of its lightconv and transformer models (docs/fairseq-parity.md):
//   token tables N(0, d^-1/2) with a zero [PAD] row (fairseq's Embedding), LayerNorm 1/0;
//   Linear weights Xavier-uniform, biases 0 (lightconv.py's Linear(): conv input/output, FFN of the conv layers);
//   attention query/key/value: Xavier-uniform with gain 1/sqrt(2), biases as torch.nn.Linear leaves them
//   (MultiheadAttention.reset_parameters, q, k and v of one size); the attention output projection Xavier gain 1,
//   bias 0 (its out_proj);
//   the dynamic convolutions' kernel projection (DynamicConv1dTBC.reset_parameters calls nn.Linear's):
//   torch.nn.Linear's default;
//   the FFN of a self-attention layer (TransformerEncoderLayer / DecoderLayer fc1, fc2: plain nn.Linear):
//   torch.nn.Linear's default (kaiming-uniform a = sqrt(5), bias uniform +-1/sqrt(fan_in)).
// Conv kernels keep their own scheme.
void init_seq2seq_weights(torch::nn::Module& root, int64_t hidden) {
  torch::NoGradGuard no_grad;
  for (auto& item : root.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    torch::nn::Module& module = *item.value();
    if (auto* linear = module.as<torch::nn::Linear>()) {
      const bool projection =
          ends_with(name, "attention.query") || ends_with(name, "attention.key") || ends_with(name, "attention.value");
      if (ends_with(name, "kernel_projection")) {
        linear->reset_parameters();
      } else if (projection) {
        linear->reset_parameters();  // the bias as torch.nn.Linear draws it
        torch::nn::init::xavier_uniform_(linear->weight, 1.0 / std::sqrt(2.0));
      } else {
        torch::nn::init::xavier_uniform_(linear->weight);
        if (linear->bias.defined()) linear->bias.zero_();
      }
    } else if (auto* table = module.as<torch::nn::Embedding>()) {
      table->weight.normal_(0, std::pow(static_cast<double>(hidden), -0.5));
      table->weight[0].zero_();
    }
  }
  // Self-attention layers' FFNs last: torch.nn.Linear's own initialisation, as fairseq's transformer layers.
  for (auto& item : root.named_modules("", /*include_self=*/false)) {
    if (!item.value()->named_children().contains("attention")) continue;
    for (auto& child : item.value()->named_modules("", /*include_self=*/false)) {
      if (child.key().rfind("ffn", 0) != 0) continue;
      if (auto* linear = child.value()->as<torch::nn::Linear>()) linear->reset_parameters();
    }
  }
}

torch::nn::Embedding token_table(const pb::ModelConfig& config) {
  return torch::nn::Embedding(torch::nn::EmbeddingOptions(config.vocab_size(), config.hidden_size()).padding_idx(0));
}

// T5's positions: only self-attention stacks take them (conv layers see positions through their kernels).
void check_relative_positions(const pb::ModelConfig& config) {
  const auto& s = config.seq2seq();
  if (config.family() != pb::BERT || s.decoder_family() != pb::BERT || s.encoder_top_attention()) {
    throw UsageError(str("encoder-decoder '", config.name(), "': seq2seq.relative_buckets (T5's positions) is for ",
                         "self-attention encoders and decoders; expected family and seq2seq.decoder_family BERT "
                         "and no encoder_top_attention"));
  }
}

// Gives every self-attention layer under `stack` the stack's one T5 bias table.
void share_position_bias(torch::nn::Module& stack, const RelativePositionBias& bias) {
  for (auto& module : stack.modules(/*include_self=*/false)) {
    if (auto* attention = module->as<BertSelfAttentionImpl>()) attention->share_position_bias(bias);
    if (auto* attention = module->as<CausalSelfAttentionImpl>()) attention->position_bias = bias;
  }
}

}  // namespace

pb::ModelConfig seq2seq_decoder_config(const pb::ModelConfig& config) {
  pb::ModelConfig decoder = config;
  const auto& s = config.seq2seq();
  decoder.set_family(s.decoder_family());
  decoder.set_num_layers(s.decoder_layers());
  auto* block = decoder.mutable_conv_block();
  block->clear_kernel_sizes();
  for (int k : s.decoder_kernel_sizes()) block->add_kernel_sizes(k);
  block->set_causal(true);
  return decoder;
}

void DecoderState::reorder(const torch::Tensor& rows) {
  for (auto& layer : layers) layer.reorder(rows);
  memory_mask = memory_mask.index_select(0, rows);
}

Seq2SeqModelImpl::Seq2SeqModelImpl(const pb::ModelConfig& config)
    : config_(config), embed_scale_(std::sqrt(static_cast<double>(config.hidden_size()))) {
  if (!config.has_seq2seq()) throw UsageError(str("model config '", config.name(), "' is not an encoder-decoder"));
  if (config.embedding_size() != config.hidden_size()) {
    throw UsageError(str("encoder-decoder '", config.name(), "': expected embedding_size == hidden_size, got ",
                         config.embedding_size(), " and ", config.hidden_size()));
  }
  const auto& s = config.seq2seq();
  source_table = register_module("source_table", token_table(config));
  if (!s.share_embeddings()) target_table = register_module("target_table", token_table(config));
  dropout = register_module("dropout", Dropout(config.dropout()));
  encoder = register_module("encoder", EncoderStack(config));
  if (s.encoder_top_attention()) {
    pb::ModelConfig attention = config;
    attention.set_family(pb::BERT);
    attention.clear_attention();  // plain softmax attention; the positions came with the embeddings
    encoder_top_attention = register_module("encoder_top_attention", EncoderLayer(attention, config.num_layers()));
  }
  const pb::ModelConfig decoder_config = seq2seq_decoder_config(config);
  const MixerFamily& family = mixer_family(decoder_config.family());
  if (!family.build_causal) {
    throw UsageError(str("encoder-decoder '", config.name(), "': the ", family.name,
                         " family has no causal form for the decoder; expected seq2seq.decoder_family BERT, "
                         "LIGHTCONV, DYNAMICCONV or DILATEDCONV"));
  }
  DecoderLayerSizes sizes;
  sizes.hidden = config.hidden_size();
  sizes.heads = config.num_heads();
  sizes.intermediate = config.intermediate_size();
  sizes.dropout = config.dropout();
  sizes.attention_dropout = config.attention_dropout();
  sizes.layer_norm_eps = config.layer_norm_eps();
  sizes.normalize_mixer_output = config.normalize_mixer_output();
  sizes.normalize_before = s.normalize_before();
  sizes.ffn_activation = config.ffn_activation();
  for (int64_t i = 0; i < s.decoder_layers(); ++i) {
    decoder->push_back(DecoderLayer(family.build_causal(decoder_config, i), family.module_name, sizes));
  }
  register_module("decoder", decoder);
  if (s.normalize_before()) {
    auto norm = [&] {
      return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size()}).eps(config.layer_norm_eps()));
    };
    encoder_norm = register_module("encoder_norm", norm());
    decoder_norm = register_module("decoder_norm", norm());
  }
  if (s.relative_buckets() > 0) {
    check_relative_positions(config);
    // T5's initialisation of the tables: N(0, d^-1/2).
    const double init_std = std::pow(static_cast<double>(config.hidden_size()), -0.5);
    encoder_position_bias = register_module(
        "encoder_position_bias", RelativePositionBias(config.num_heads(), s.relative_buckets(),
                                                      s.relative_max_distance(), /*bidirectional=*/true, init_std));
    decoder_position_bias = register_module(
        "decoder_position_bias", RelativePositionBias(config.num_heads(), s.relative_buckets(),
                                                      s.relative_max_distance(), /*bidirectional=*/false, init_std));
    share_position_bias(*encoder, encoder_position_bias);
    share_position_bias(*decoder, decoder_position_bias);
  }
  if (!s.tie_output()) {
    output_projection = register_module(
        "output_projection",
        torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size(), config.vocab_size()).bias(false)));
  }
  init_seq2seq_weights(*this, config.hidden_size());
}

torch::Tensor Seq2SeqModelImpl::embed(torch::nn::Embedding table, const torch::Tensor& ids,
                                      const torch::Tensor& positions) {
  torch::Tensor x = table->forward(ids) * embed_scale_;
  return dropout(positions.defined() ? x + positions : x);
}

torch::Tensor Seq2SeqModelImpl::logits(const torch::Tensor& hidden) {
  if (output_projection) return output_projection(hidden);
  return torch::matmul(hidden, target_embedding()->weight.t());
}

torch::Tensor Seq2SeqModelImpl::encode(const torch::Tensor& source, const torch::Tensor& source_mask) {
  const auto dtype = source_table->weight.scalar_type();
  torch::Tensor x =
      embed(source_table, source,
            encoder_position_bias ? torch::Tensor() : sinusoidal_positions(source_mask, config_.hidden_size(), dtype));
  x = encoder(x, source_mask);
  if (encoder_top_attention) x = encoder_top_attention(x, source_mask);
  return encoder_norm ? encoder_norm(x) : x;
}

torch::Tensor Seq2SeqModelImpl::decode(const torch::Tensor& target_in, const torch::Tensor& target_mask,
                                       const torch::Tensor& memory, const torch::Tensor& memory_mask) {
  const auto dtype = source_table->weight.scalar_type();
  torch::Tensor x =
      embed(target_embedding(), target_in,
            decoder_position_bias ? torch::Tensor() : sinusoidal_positions(target_mask, config_.hidden_size(), dtype));
  for (auto& layer : *decoder) x = layer->as<DecoderLayer>()->forward(x, target_mask, memory, memory_mask);
  return logits(decoder_norm ? decoder_norm(x) : x);
}

DecoderState Seq2SeqModelImpl::start_decoding(const torch::Tensor& memory, const torch::Tensor& memory_mask) {
  DecoderState state;
  state.memory_mask = memory_mask;
  state.layers.resize(decoder->size());
  for (size_t i = 0; i < decoder->size(); ++i) {
    decoder->ptr(i)->as<DecoderLayer>()->start_decoding(memory, state.layers[i]);
  }
  return state;
}

torch::Tensor Seq2SeqModelImpl::decode_step(const torch::Tensor& tokens, int64_t step, DecoderState& state) {
  const auto dtype = source_table->weight.scalar_type();
  // Real target tokens are numbered from 1, as sinusoidal_positions numbers them in the full forward.
  torch::Tensor positions;
  if (!decoder_position_bias) {
    positions =
        sinusoidal_encoding(torch::full({tokens.size(0), 1}, step + 1, tokens.options()), config_.hidden_size(), dtype);
  }
  torch::Tensor x = embed(target_embedding(), tokens.unsqueeze(1), positions);
  for (size_t i = 0; i < decoder->size(); ++i) {
    x = decoder->ptr(i)->as<DecoderLayer>()->forward_step(x, state.memory_mask, state.layers[i]);
  }
  return logits(decoder_norm ? decoder_norm(x) : x).squeeze(1);
}

}  // namespace cabert::models
