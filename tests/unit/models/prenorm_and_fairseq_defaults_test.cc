// Pre-norm encoder-decoders (seq2seq.normalize_before, fairseq's --encoder/decoder-normalize-before) against a
// plain-ATen reference of the sublayer order (LayerNorm, mixer, residual; the final LayerNorms of the encoder and
// decoder), the FFN activation, the fairseq defaults of the wu-* and transformer-* presets, fairseq's
// initialisation of the attention projections, and configs written before these fields (every checkpoint of an
// older cabert) keeping GELU and post-norm.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/sinusoidal_positions.h"

namespace cabert::models {
namespace {

namespace F = torch::nn::functional;

torch::Tensor layer_norm(const torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  return torch::layer_norm(x, {x.size(-1)}, norm->weight, norm->bias, 1e-5);
}

torch::Tensor linear(const torch::nn::Linear& l, const torch::Tensor& x) { return F::linear(x, l->weight, l->bias); }

torch::Tensor ffn(const FeedForward& f, const torch::Tensor& x, bool relu) {
  torch::Tensor h = linear(f->in, x);
  return linear(f->out, relu ? torch::relu(h) : torch::gelu(h));
}

// fairseq's TransformerEncoderLayer / LightConvEncoderLayer, normalize_before true or false.
torch::Tensor encoder_layer_reference(EncoderLayerImpl& layer, const torch::Tensor& x, const torch::Tensor& mask,
                                      bool before, bool relu) {
  if (before) {
    torch::Tensor h = x + linear(layer.output, layer.mixer->forward(layer_norm(layer.attention_norm, x), mask));
    return h + ffn(layer.ffn, layer_norm(layer.ffn_norm, h), relu);
  }
  torch::Tensor h = layer_norm(layer.attention_norm, x + linear(layer.output, layer.mixer->forward(x, mask)));
  return layer_norm(layer.ffn_norm, h + ffn(layer.ffn, h, relu));
}

torch::Tensor decoder_layer_reference(DecoderLayerImpl& layer, const torch::Tensor& x, const torch::Tensor& memory,
                                      const torch::Tensor& memory_mask, bool before, bool relu) {
  if (before) {
    torch::Tensor h = x + linear(layer.output, layer.mixer->forward(layer_norm(layer.mixer_norm, x), {}));
    torch::Tensor attended = layer.cross_attention->forward(layer_norm(layer.cross_norm, h), memory, memory_mask);
    torch::Tensor c = h + linear(layer.cross_output, attended);
    return c + ffn(layer.ffn, layer_norm(layer.ffn_norm, c), relu);
  }
  torch::Tensor h = layer_norm(layer.mixer_norm, x + linear(layer.output, layer.mixer->forward(x, {})));
  torch::Tensor attended = layer.cross_attention->forward(h, memory, memory_mask);
  torch::Tensor c = layer_norm(layer.cross_norm, h + linear(layer.cross_output, attended));
  return layer_norm(layer.ffn_norm, c + ffn(layer.ffn, c, relu));
}

torch::Tensor embedded(Seq2SeqModelImpl& model, const torch::Tensor& ids, const torch::Tensor& mask) {
  const int64_t d = model.config().hidden_size();
  return model.target_embedding()->weight.index_select(0, ids.flatten()).view({ids.size(0), ids.size(1), d}) *
             std::sqrt(static_cast<double>(d)) +
         sinusoidal_positions(mask, d, torch::kDouble);
}

// The whole encoder-decoder's logits, layer by layer through the references above.
torch::Tensor model_reference(Seq2SeqModelImpl& model, const torch::Tensor& source, const torch::Tensor& target_in,
                              bool before, bool relu) {
  torch::Tensor source_mask = source.ne(0), target_mask = torch::ones_like(target_in, torch::kBool);
  torch::Tensor x = embedded(model, source, source_mask);
  for (auto& layer : *model.encoder->layers) {
    x = encoder_layer_reference(*layer->as<EncoderLayer>(), x, source_mask, before, relu);
  }
  torch::Tensor memory = before ? layer_norm(model.encoder_norm, x) : x;
  torch::Tensor y = embedded(model, target_in, target_mask);
  for (auto& layer : *model.decoder) {
    y = decoder_layer_reference(*layer->as<DecoderLayer>(), y, memory, source_mask, before, relu);
  }
  if (before) y = layer_norm(model.decoder_norm, y);
  return torch::matmul(y, model.target_embedding()->weight.t());
}

Seq2SeqModel model_of(const std::string& preset, std::vector<std::string> sets) {
  torch::manual_seed(5);
  sets.push_back("vocab_size=40");
  Seq2SeqModel model(config::load_model_config(preset, sets));
  model->to(torch::kDouble);
  model->eval();
  return model;
}

struct Batch {
  torch::Tensor source, target_in;
};
Batch batch() {
  torch::manual_seed(6);
  torch::Tensor source = torch::randint(5, 40, {2, 7}, torch::kLong);
  source[1].narrow(0, 4, 3).fill_(0);  // a shorter source, padded
  return {source, torch::randint(5, 40, {2, 6}, torch::kLong)};
}

class PreNorm : public ::testing::TestWithParam<std::string> {};

TEST_P(PreNorm, LogitsEqualThePlainReferenceWithFinalLayerNorms) {
  Seq2SeqModel model = model_of(GetParam(), {"seq2seq.normalize_before=true"});
  ASSERT_TRUE(model->encoder_norm);
  ASSERT_TRUE(model->decoder_norm);
  torch::NoGradGuard no_grad;
  {  // final LayerNorms that are not the identity, so that leaving one out shows
    model->encoder_norm->weight.normal_(1.0, 0.3), model->encoder_norm->bias.normal_(0.0, 0.3);
    model->decoder_norm->weight.normal_(1.0, 0.3), model->decoder_norm->bias.normal_(0.0, 0.3);
  }
  Batch b = batch();
  const bool relu = model->config().ffn_activation() == pb::RELU;
  torch::Tensor logits = model->forward(b.source, b.source.ne(0), b.target_in, torch::ones_like(b.target_in).to(torch::kBool));
  torch::Tensor expected = model_reference(*model, b.source, b.target_in, /*before=*/true, relu);
  EXPECT_TRUE(torch::allclose(logits, expected, 1e-10, 1e-10)) << (logits - expected).abs().max().item<double>();
  torch::Tensor post_norm = model_reference(*model, b.source, b.target_in, /*before=*/false, relu);
  EXPECT_GT((logits - post_norm).abs().max().item<double>(), 1e-3);  // the reference tells the two apart
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, PreNorm,
                         ::testing::Values("transformer-tiny", "wu-lightconv-tiny", "wu-dynamicconv-tiny",
                                           "tay-dilatedconv-tiny"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// A config recorded before ffn_activation and normalize_before existed (the wu-lightconv-tiny preset as an
// older cabert wrote it into its checkpoints): GELU, post-norm, no final LayerNorms, the same logits as the
// post-norm GELU reference.
TEST(OlderConfigs, KeepGeluAndPostNorm) {
  const std::string recorded = config::config_to_text(config::load_model_config("wu-lightconv-tiny", {}));
  std::string old_text;
  for (size_t start = 0; start < recorded.size();) {
    size_t end = recorded.find('\n', start);
    if (end == std::string::npos) end = recorded.size();
    const std::string line = recorded.substr(start, end - start);
    if (line.find("ffn_activation") == std::string::npos && line.find("normalize_before") == std::string::npos) {
      old_text += line + "\n";
    }
    start = end + 1;
  }
  pb::ModelConfig old = config::parse_model_config_text(old_text, "old");
  EXPECT_EQ(old.ffn_activation(), pb::GELU);
  EXPECT_FALSE(old.seq2seq().normalize_before());
  old.set_vocab_size(40);
  torch::manual_seed(5);
  Seq2SeqModel model(old);
  model->to(torch::kDouble);
  model->eval();
  EXPECT_FALSE(model->encoder_norm);
  EXPECT_FALSE(model->decoder_norm);
  torch::NoGradGuard no_grad;
  Batch b = batch();
  torch::Tensor logits = model->forward(b.source, b.source.ne(0), b.target_in, torch::ones_like(b.target_in).to(torch::kBool));
  torch::Tensor gelu = model_reference(*model, b.source, b.target_in, /*before=*/false, /*relu=*/false);
  torch::Tensor relu = model_reference(*model, b.source, b.target_in, /*before=*/false, /*relu=*/true);
  EXPECT_TRUE(torch::allclose(logits, gelu, 1e-10, 1e-10));
  EXPECT_GT((logits - relu).abs().max().item<double>(), 1e-6);
}

TEST(FairseqDefaults, WuAndTransformerPresetsUseReluTayKeepsGelu) {
  for (const char* name : {"wu-lightconv-small", "wu-dynamicconv-iwslt", "transformer-small", "transformer-wmt"}) {
    EXPECT_EQ(config::load_model_config(name, {}).ffn_activation(), pb::RELU) << name;
  }
  for (const char* name : {"tay-lightconv-small", "tay-dilatedconv-base", "bert-small-absolute"}) {
    EXPECT_EQ(config::load_model_config(name, {}).ffn_activation(), pb::GELU) << name;
  }
  EXPECT_FLOAT_EQ(config::load_model_config("transformer-iwslt", {}).attention_dropout(), 0.0f);
  EXPECT_FLOAT_EQ(config::load_model_config("wu-lightconv-iwslt", {}).attention_dropout(), 0.1f);
  EXPECT_FLOAT_EQ(config::load_model_config("tay-lightconv-small", {}).attention_dropout(), 0.1f);
  EXPECT_FALSE(config::load_model_config("transformer-small", {}).seq2seq().normalize_before());
  EXPECT_EQ(config::load_model_config("transformer-small", {"ffn_activation=GELU"}).ffn_activation(), pb::GELU);
}

// fairseq's MultiheadAttention.reset_parameters: q, k, v Xavier-uniform with gain 1/sqrt(2) (bound
// sqrt(6 / (2 d)) / sqrt(2)), out_proj Xavier gain 1 and bias 0; the Transformer's FFN (plain nn.Linear):
// uniform(+-1/sqrt(fan_in)) weights and biases; the conv layers' FFN (lightconv.py's Linear): Xavier, bias 0.
TEST(FairseqDefaults, InitialisationFollowsFairseq) {
  torch::manual_seed(1);
  Seq2SeqModel transformer(config::load_model_config("transformer-small", {"vocab_size=100"}));
  const double d = 256, I = 512;
  auto& layer = *transformer->decoder->ptr(0)->as<DecoderLayer>();
  const double qkv_bound = std::sqrt(6.0 / (2 * d)) / std::sqrt(2.0);
  for (const auto& l : {layer.cross_attention->query, layer.cross_attention->key, layer.cross_attention->value}) {
    const double max = l->weight.abs().max().item<double>();
    EXPECT_LE(max, qkv_bound);
    EXPECT_GT(max, 0.95 * qkv_bound);
    EXPECT_GT(l->bias.abs().max().item<double>(), 0.0);
    EXPECT_LE(l->bias.abs().max().item<double>(), 1.0 / std::sqrt(d));
  }
  const double xavier = std::sqrt(6.0 / (2 * d));
  EXPECT_GT(layer.cross_output->weight.abs().max().item<double>(), 0.95 * qkv_bound * std::sqrt(2.0));
  EXPECT_LE(layer.cross_output->weight.abs().max().item<double>(), xavier);
  EXPECT_EQ(layer.cross_output->bias.abs().max().item<double>(), 0.0);
  const double fc1_bound = 1.0 / std::sqrt(d), fc2_bound = 1.0 / std::sqrt(I);
  EXPECT_LE(layer.ffn->in->weight.abs().max().item<double>(), fc1_bound);
  EXPECT_GT(layer.ffn->in->weight.abs().max().item<double>(), 0.95 * fc1_bound);
  EXPECT_LE(layer.ffn->out->weight.abs().max().item<double>(), fc2_bound);
  EXPECT_GT(layer.ffn->out->bias.abs().max().item<double>(), 0.0);
  auto& encoder_layer = *transformer->encoder->layers->ptr(0)->as<EncoderLayer>();
  EXPECT_GT(encoder_layer.ffn->in->bias.abs().max().item<double>(), 0.0);

  Seq2SeqModel conv(config::load_model_config("wu-lightconv-small", {"vocab_size=100"}));
  auto& conv_layer = *conv->decoder->ptr(0)->as<DecoderLayer>();
  const double ffn_xavier = std::sqrt(6.0 / (d + I));
  EXPECT_GT(conv_layer.ffn->in->weight.abs().max().item<double>(), 0.95 * ffn_xavier);
  EXPECT_LE(conv_layer.ffn->in->weight.abs().max().item<double>(), ffn_xavier);
  EXPECT_EQ(conv_layer.ffn->in->bias.abs().max().item<double>(), 0.0);
  EXPECT_LE(conv_layer.cross_attention->query->weight.abs().max().item<double>(), qkv_bound);
}

}  // namespace
}  // namespace cabert::models
