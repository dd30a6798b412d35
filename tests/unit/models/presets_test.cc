// Presets: parameter counts by hand, overrides, text-format round trip, and padding invariance of every
// tiny encoder (masking in every branch: padded positions hold random tokens and must not matter).
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/models/encoder.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/summary.h"
#include "tests/test_paths.h"

namespace cabert::models {
namespace {

using config::config_to_text;
using config::load_model_config;
using config::preset_config;
using config::preset_names;

struct Sizes {
  int64_t V, E, H, L, N, I, P;
};

// Embeddings (+ positions), E->H projection, MLM head with tied output embedding: SPEC.md section 2.
int64_t shared_parameters(const Sizes& s, bool positions) {
  int64_t embeddings = s.V * s.E + 2 * s.E + 2 * s.E + (positions ? s.P * s.E : 0);
  int64_t projection = s.E != s.H ? s.E * s.H + s.H : 0;
  int64_t head = s.H * s.E + s.E + 2 * s.E + s.V;
  return embeddings + projection + head;
}
int64_t ffn_and_norms(const Sizes& s) { return s.H * s.I + s.I + s.I * s.H + s.H + 4 * s.H; }

// Extra parameters per layer of each Chang et al. variant (K = 2n+1, d = H/N).
int64_t bert_layer(const Sizes& s, int64_t K, const std::string& variant) {
  const int64_t d = s.H / s.N;
  int64_t layer = 4 * (s.H * s.H + s.H) + ffn_and_norms(s);
  auto has = [&](const std::string& part) { return variant.find(part) != std::string::npos; };
  if (has("fixed") || has("composite")) layer += s.N * K;
  if (has("dynamic") || has("composite")) layer += K * d;
  if (has("key")) layer += K * d;
  if (has("depthwise")) layer += s.H * K + s.H + s.N;
  const int64_t conv_projection = s.H * K + s.H;  // depthwise + bias; pointwise replaces half the linear
  if (has("conv-qk")) layer += 2 * conv_projection;
  if (has("conv-v")) layer += conv_projection;
  if (has("conv-qkv")) layer += conv_projection;  // q, k (above) and v
  return layer;
}

int64_t count(const std::string& preset) { return count_parameters(*MlmModel(preset_config(preset))); }

TEST(PresetParameters, BertTinyVariantsByHand) {
  const Sizes s{1000, 32, 64, 2, 2, 128, 128};
  for (const std::string variant :
       {"absolute", "none", "fixed", "dynamic", "composite", "composite-key", "depthwise", "composite-depthwise",
        "conv-qk", "conv-v", "conv-qkv", "composite-conv-qk", "composite-conv-v", "composite-conv-qkv"}) {
    const int64_t expected = shared_parameters(s, variant == "absolute") + s.L * bert_layer(s, 7, variant);
    EXPECT_EQ(count("bert-tiny-" + variant), expected) << variant;
  }
  EXPECT_EQ(count("bert-tiny-absolute"), 108424);  // 36224 + 2112 + 2 x 33472 + 3144, on paper
}

TEST(PresetParameters, BertSmallMatchesChangTables) {
  // Chang et al. Tables 1-3 (rounded to 10K): 13.43M absolute, 13.41M none, 13.42M fixed, 13.43M dynamic
  // and composite, 13.44M composite+key, 13.47M depthwise, 13.48M composite+depthwise, 13.47M conv values.
  EXPECT_EQ(count("bert-small-absolute"), 13430708);
  const Sizes s{30004, 128, 256, 12, 4, 1024, 128};
  const std::map<std::string, double> paper = {{"none", 13.41},
                                               {"fixed", 13.42},
                                               {"dynamic", 13.43},
                                               {"composite", 13.43},
                                               {"composite-key", 13.44},
                                               {"depthwise", 13.47},
                                               {"composite-depthwise", 13.48},
                                               {"conv-v", 13.47},
                                               {"composite-conv-v", 13.48},
                                               {"conv-qkv", 13.58},
                                               {"composite-conv-qk", 13.54},
                                               {"composite-conv-qkv", 13.59}};
  for (const auto& [variant, millions] : paper) {
    const int64_t n = count("bert-small-" + variant);
    EXPECT_EQ(n, shared_parameters(s, false) + s.L * bert_layer(s, 17, variant)) << variant;
    EXPECT_NEAR(n / 1e6, millions, 0.005 + 1e-9) << variant;
  }
}

TEST(PresetParameters, ConvBertAndConvBlocksTinyByHand) {
  const Sizes s{1000, 32, 64, 2, 2, 128, 128};
  // ConvBERT tiny: 1 attention head of 32 (head ratio 2), SDConv k = 5 with 1 conv head.
  const int64_t A = 32, k = 5;
  const int64_t convbert_layer = 3 * (s.H * A + A)          // query, key, value
                                 + (s.H * k + s.H * A + A)  // SepConv: depthwise (no bias) + pointwise
                                 + (A * k + k)              // W_f -> 1 head x k
                                 + (s.H * A + A)            // V'
                                 + (2 * A * s.H + s.H)      // output on [attention | conv]
                                 + ffn_and_norms(s);
  EXPECT_EQ(count("convbert-tiny"), shared_parameters(s, true) + 2 * convbert_layer);
  // Wu et al. blocks: Linear(d->2d) for GLU, kernels [3, 7], output Linear(d->d); no position embeddings.
  auto block = [&](int64_t kernel, bool dynamic) {
    return s.H * 2 * s.H + 2 * s.H + (dynamic ? s.H * s.N * kernel : s.N * kernel) + s.H * s.H + s.H + ffn_and_norms(s);
  };
  EXPECT_EQ(count("lightconv-tiny"), shared_parameters(s, false) + block(3, false) + block(7, false));
  EXPECT_EQ(count("dynamicconv-tiny"), shared_parameters(s, false) + block(3, true) + block(7, true));
}

TEST(PresetParameters, ConvBertSmallMatchesThePapers) {
  // Chang et al. Table 7: ConvBERT-small 13.1M (encoder + tied MLM head, vocab 30004); ConvBERT Table 3:
  // small 14M and medium-small 17M (rounded), which our ELECTRA model (with generator) and encoder match.
  EXPECT_NEAR(count("convbert-small") / 1e6, 13.1, 0.05);
  EXPECT_NEAR(count_parameters(*ElectraModel(preset_config("convbert-small"))) / 1e6, 14.0, 0.5);
  EXPECT_NEAR(count("convbert-medium-small") / 1e6, 17.0, 0.5);
}

TEST(PresetParameters, ElectraGeneratorSharesEmbeddings) {
  pb::ModelConfig config = preset_config("convbert-small");
  ElectraModel electra(config);
  MlmModel mlm(config);
  // The generator adds its own stack and head but no second embedding table.
  int64_t embeddings = count_parameters(*electra->encoder->embeddings);
  EXPECT_EQ(embeddings, count_parameters(*mlm->encoder->embeddings));
  for (const auto& p : electra->named_parameters()) {
    EXPECT_EQ(p.key().find("generator.embeddings"), std::string::npos) << p.key();
  }
  pb::ModelConfig g = generator_config(config);
  EXPECT_EQ(g.hidden_size(), 64);
  EXPECT_EQ(g.num_heads(), 1);
  EXPECT_EQ(g.intermediate_size(), 256);
  EXPECT_EQ(generator_config(preset_config("convbert-base")).hidden_size(), 256);
}

TEST(PresetOverrides, SetsNestedEnumsAndLists) {
  pb::ModelConfig c = load_model_config(
      "convbert-small", {"convbert.conv_kind=plain-dynamic", "convbert.ffn_groups=2", "dropout=0.2", "name=mine"});
  EXPECT_EQ(c.convbert().conv_kind(), pb::PLAIN_DYNAMIC);
  EXPECT_EQ(c.convbert().ffn_groups(), 2);
  EXPECT_FLOAT_EQ(c.dropout(), 0.2f);
  EXPECT_EQ(c.name(), "mine");
  c = load_model_config("lightconv-small", {"conv_block.kernel_sizes=[5, 9]", "attention.absolute_positions=true"});
  ASSERT_EQ(c.conv_block().kernel_sizes_size(), 2);
  EXPECT_EQ(c.conv_block().kernel_sizes(1), 9);
  EXPECT_TRUE(c.attention().absolute_positions());
}

TEST(PresetOverrides, ClearErrors) {
  auto message = [](const std::string& preset, const std::vector<std::string>& sets) {
    try {
      load_model_config(preset, sets);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("bert-small-composite", {"attention.radius=3"}).find("unknown field 'radius' in AttentionConfig"),
            std::string::npos);
  EXPECT_NE(message("bert-small-composite", {"hidden_size=abc"}).find("expected int32, got 'abc'"), std::string::npos);
  EXPECT_NE(message("convbert-small", {"convbert.conv_kind=fancy"}).find("expected one of SDCONV PLAIN_DYNAMIC"),
            std::string::npos);
  EXPECT_NE(message("bert-small-composite", {"num_heads=3"}).find("expected hidden_size divisible by num_heads"),
            std::string::npos);
  EXPECT_NE(message("bert-huge", {}).find("unknown model preset 'bert-huge'"), std::string::npos);
  EXPECT_NE(message("bert-small-composite", {"dropout"}).find("--set expects key=value"), std::string::npos);
}

// Found while fuzzing the config loader (tests/fuzz/model_config_fuzz): NaN, infinite and out-of-range
// probabilities and scales passed validation (a NaN mask probability, a max_predictions_fraction of 1e30
// whose conversion to a count is undefined behaviour). Checkpoints' stored configs go through the same checks.
TEST(PresetOverrides, NonFiniteAndOutOfRangeNumbersAreRefused) {
  auto problem = [](const std::vector<std::string>& sets) {
    try {
      load_model_config("bert-tiny-composite", sets);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(problem({"layer_norm_eps=nan"}).find("expected finite, non-negative layer_norm_eps"), std::string::npos);
  EXPECT_NE(problem({"initializer_range=-0.02"}).find("and initializer_range, got 1e-12 and -0.02"), std::string::npos);
  EXPECT_NE(problem({"mask_probability=1.5"}).find("expected mask_probability, mask_token_fraction"),
            std::string::npos);
  EXPECT_NE(problem({"mask_token_fraction=0.95"}).find("summing to at most 1"), std::string::npos);
  EXPECT_NE(problem({"electra.max_predictions_fraction=1e30"}).find("expected electra.mask_probability"),
            std::string::npos);
  EXPECT_NE(problem({"electra.generator_weight=inf"}).find("expected finite, non-negative electra weights"),
            std::string::npos);
  EXPECT_EQ(problem({"mask_token_fraction=0.7", "random_token_fraction=0.3"}), "no error");
  for (const auto& name : preset_names()) EXPECT_EQ(config::model_config_problem(preset_config(name)), "") << name;
}

TEST(PresetOverrides, TextprotoRoundTrip) {
  for (const auto& name : preset_names()) {
    const std::string path = testing::temp_dir() + "/config.textproto";
    testing::write_text(path, config_to_text(preset_config(name)));
    pb::ModelConfig loaded = load_model_config(path);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(loaded, preset_config(name))) << name;
  }
  const std::string bad = testing::temp_dir() + "/bad.textproto";
  testing::write_text(bad, "hidden_size: 64\nnum_layerz: 2\n");
  try {
    load_model_config(bad);
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.textproto:2:"), std::string::npos) << e.what();
  }
}

// Every tiny preset: the hidden states of real tokens do not depend on padding (random ids behind the mask)
// nor on the batch they are in, and any length up to the maximum works.
TEST(EncoderPadding, EveryTinyPresetIgnoresPadding) {
  for (const auto& name : preset_names()) {
    if (name.find("tiny") == std::string::npos) continue;
    pb::ModelConfig config = preset_config(name);
    torch::manual_seed(5);
    Encoder encoder(config);
    encoder->eval();
    {
      torch::NoGradGuard no_grad;
      for (auto& p : encoder->parameters()) {  // make zero-initialised terms (beta) matter
        if (p.abs().sum().item<double>() == 0) p.normal_(0, 0.5);
      }
    }
    torch::Tensor ids = torch::randint(5, config.vocab_size(), {1, 9});
    torch::Tensor segments = torch::cat({torch::zeros({1, 5}), torch::ones({1, 4})}, 1).to(torch::kInt64);
    torch::Tensor alone = encoder(ids, segments, torch::ones({1, 9}, torch::kBool));
    torch::Tensor padded_ids = torch::cat({ids, torch::randint(5, config.vocab_size(), {1, 6})}, 1);
    torch::Tensor padded_segments = torch::cat({segments, torch::ones({1, 6}, torch::kInt64)}, 1);
    torch::Tensor mask = torch::cat({torch::ones({1, 9}), torch::zeros({1, 6})}, 1).to(torch::kBool);
    torch::Tensor other = torch::randint(5, config.vocab_size(), {1, 15});
    torch::Tensor batch = encoder(torch::cat({padded_ids, other}), torch::cat({padded_segments, padded_segments}),
                                  torch::cat({mask, torch::ones({1, 15}, torch::kBool)}));
    EXPECT_EQ(batch.sizes(), (std::vector<int64_t>{2, 15, config.hidden_size()}));
    EXPECT_TRUE(torch::allclose(batch.index({0, torch::indexing::Slice(0, 9)}), alone[0], 1e-4, 1e-5))
        << name << ": max difference "
        << (batch.index({0, torch::indexing::Slice(0, 9)}) - alone[0]).abs().max().item<double>();
  }
  pb::ModelConfig config = preset_config("bert-tiny-composite-conv-qkv");
  Encoder encoder(config);
  const int64_t T = config.max_length();
  EXPECT_EQ(
      encoder(torch::randint(5, 100, {1, T}), torch::zeros({1, T}, torch::kInt64), torch::ones({1, T}, torch::kBool))
          .size(1),
      T);
}

TEST(EncoderPadding, RefusesSequencesLongerThanTheMaximum) {
  pb::ModelConfig config = preset_config("bert-tiny-absolute");
  Encoder encoder(config);
  const int64_t T = config.max_length() + 1;
  EXPECT_THROW(encoder(torch::ones({1, T}, torch::kInt64), torch::zeros({1, T}, torch::kInt64),
                       torch::ones({1, T}, torch::kBool)),
               Error);
}

}  // namespace
}  // namespace cabert::models
