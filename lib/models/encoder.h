// The encoder every paper variant shares: embeddings (+ Linear E->H when E != H) and post-LN layers
//   h = LN(x + Drop(Out(Mix(x)))),  y = LN(h + Drop(FFN(h)))
// (Tay et al.'s blocks, config.normalize_mixer_output: h = x + LN(Drop(Out(Mix(x)))), y as above), or, in an
// encoder-decoder with seq2seq.normalize_before (fairseq's --encoder-normalize-before), pre-LN layers
//   h = x + Drop(Out(Mix(LN(x)))),  y = h + Drop(FFN(LN(h)))
// with the same LayerNorm modules (the encoder-decoder adds the final LayerNorm of the stack).
// where Mix is the family's token mixer (lib/models/mixer.h), built from the explicit table in
// mixer_registry.cc: BERT self-attention (any Chang et al. variant), ConvBERT mixed attention or a Wu et al.
// conv block, chosen by config.family. The encoder itself knows no family.
#pragma once

#include <torch/torch.h>

#include "formats/model.pb.h"
#include "lib/models/layers.h"
#include "lib/models/mixer.h"

namespace cabert::models {

class EncoderLayerImpl : public torch::nn::Module {
 public:
  EncoderLayerImpl(const pb::ModelConfig& config, int64_t layer_index);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask);

  // Registered under the family's module name ("attention" or "conv"), which every checkpoint tensor name of
  // the layer's mixer starts with.
  std::shared_ptr<Mixer> mixer;
  torch::nn::Linear output{nullptr};
  torch::nn::LayerNorm attention_norm{nullptr}, ffn_norm{nullptr};
  FeedForward ffn{nullptr};
  Dropout dropout{nullptr};
  bool normalize_mixer_output, normalize_before;
};
TORCH_MODULE(EncoderLayer);

// The layers and the projection from the embedding size; shared by the encoder and the ELECTRA generator
// (which uses the discriminator's embeddings).
class EncoderStackImpl : public torch::nn::Module {
 public:
  explicit EncoderStackImpl(const pb::ModelConfig& config);
  // embedded [B, T, E] -> [B, T, H]
  torch::Tensor forward(const torch::Tensor& embedded, const torch::Tensor& mask);

  torch::nn::Linear embedding_projection{nullptr};
  torch::nn::ModuleList layers;
};
TORCH_MODULE(EncoderStack);

class EncoderImpl : public torch::nn::Module {
 public:
  explicit EncoderImpl(const pb::ModelConfig& config);
  // ids/segments int64 [B, T], mask bool [B, T] (true = real token). Returns hidden states [B, T, H].
  // Any T <= max length.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& segments, const torch::Tensor& mask);
  int64_t hidden_size() const { return config_.hidden_size(); }
  const pb::ModelConfig& config() const { return config_; }

  Embeddings embeddings{nullptr};
  EncoderStack stack{nullptr};

 private:
  pb::ModelConfig config_;
};
TORCH_MODULE(Encoder);

}  // namespace cabert::models
