// T5's relative position bias (presets t5-*): the buckets are those of T5's own bucket function (values printed
// by transformers' T5Attention._relative_position_bucket, transformers 5.23.0), the encoder's and the decoder's
// self-attention equal a plain-ATen softmax(q k^T / sqrt(d) + table[bucket(j - i)] + mask) v, one table serves every
// layer of a stack, and the configs T5's positions do not fit are refused.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lib/config/model_config_text.h"
#include "lib/core/errors.h"
#include "lib/models/composite_attention.h"
#include "lib/models/decoder_attention.h"
#include "lib/models/relative_position_bias.h"
#include "lib/models/seq2seq_model.h"
#include "lib/models/summary.h"

namespace cabert::models {
namespace {

const std::vector<int64_t> kOffsets = {0,  1,   -1, 7,  -7, 8,   -8, 11,  12,  15,   16,  -16, 17,  31,
                                       32, -32, 33, 63, 64, -64, 65, 127, 128, -128, 129, 500, -500};

TEST(T5RelativeBuckets, AreT5sBuckets) {
  // transformers: T5Attention._relative_position_bucket(offsets, bidirectional, num_buckets=32, max_distance=128)
  const std::vector<int64_t> both_ways = {0,  17, 1,  23, 7,  24, 8,  24, 25, 25, 26, 10, 26, 27,
                                          28, 12, 28, 29, 30, 14, 30, 31, 31, 15, 31, 31, 15};
  const std::vector<int64_t> causal = {0, 0,  1, 0, 7, 0,  8, 0, 0, 0,  0, 16, 0, 0,
                                       0, 21, 0, 0, 0, 26, 0, 0, 0, 31, 0, 0,  31};
  torch::Tensor offsets = torch::tensor(kOffsets, torch::kLong);
  torch::Tensor a = t5_relative_buckets(offsets, true, 32, 128), b = t5_relative_buckets(offsets, false, 32, 128);
  for (size_t i = 0; i < kOffsets.size(); ++i) {
    EXPECT_EQ(a[i].item<int64_t>(), both_ways[i]) << "offset " << kOffsets[i];
    EXPECT_EQ(b[i].item<int64_t>(), causal[i]) << "offset " << kOffsets[i];
  }
}

TEST(T5RelativeBuckets, TheBandHoldsEveryOffsetsBucketAndBetweenMatchesIt) {
  torch::manual_seed(3);
  RelativePositionBias bias(2, 32, 128, /*bidirectional=*/true, 1.0);
  torch::Tensor band = bias->band();  // [2, 257]
  ASSERT_EQ(band.sizes(), (std::vector<int64_t>{2, 257}));
  torch::Tensor between = bias->between(0, 300, 300)[0];  // [2, 300, 300]
  for (int64_t i : {0, 5, 150, 299}) {
    for (int64_t j : {0, 3, 140, 299}) {
      // Offsets beyond the radius clamp to it: the same bucket (the last of their side).
      const int64_t r = std::clamp<int64_t>(j - i, -128, 128);
      EXPECT_TRUE(torch::equal(between.select(1, i).select(1, j), band.select(1, r + 128))) << i << " " << j;
    }
  }
}

// softmax(q k^T / sqrt(d) + bias) v over heads, from the module's own projections, in plain ATen.
torch::Tensor reference_attention(torch::nn::Linear q, torch::nn::Linear k, torch::nn::Linear v, const torch::Tensor& x,
                                  const torch::Tensor& bias, int64_t heads) {
  const int64_t N = x.size(0), T = x.size(1), H = x.size(2), d = H / heads;
  auto split = [&](const torch::Tensor& t) { return t.view({N, T, heads, d}).permute({0, 2, 1, 3}); };
  torch::Tensor scores = torch::matmul(split(q(x)), split(k(x)).transpose(-1, -2)) / std::sqrt(double(d)) + bias;
  return torch::matmul(torch::softmax(scores, -1), split(v(x))).permute({0, 2, 1, 3}).reshape({N, T, H});
}

// The last module of type T under `root` (the deepest layer's attention); nullptr if none.
template <typename T>
T* last_module(torch::nn::Module& root) {
  T* found = nullptr;
  for (auto& module : root.modules(/*include_self=*/false)) {
    if (auto* typed = module->as<T>()) found = typed;
  }
  return found;
}

// table[:, bucket(j - i)] for T queries and keys, [1, heads, T, T], in plain ATen from the bucket function.
torch::Tensor square_bias(const torch::Tensor& table, int64_t T, bool bidirectional) {
  torch::Tensor offsets = torch::arange(T).unsqueeze(0) - torch::arange(T).unsqueeze(1);  // j - i
  return table.index_select(1, t5_relative_buckets(offsets, bidirectional, 32, 128).flatten())
      .view({1, table.size(0), T, T});
}

Seq2SeqModel t5_tiny() {
  torch::manual_seed(5);
  Seq2SeqModel model(config::load_model_config("t5-tiny", {"vocab_size=40", "dropout=0", "attention_dropout=0"}));
  model->to(torch::kDouble);
  model->eval();
  return model;
}

TEST(T5RelativeBias, EncoderSelfAttentionAddsTheSharedBiasOfEveryOffset) {
  Seq2SeqModel model = t5_tiny();
  torch::NoGradGuard no_grad;
  BertSelfAttentionImpl* attention = last_module<BertSelfAttentionImpl>(*model->encoder);
  ASSERT_NE(attention, nullptr);
  const int64_t N = 2, T = 9, heads = attention->heads;
  torch::Tensor x = torch::randn({N, T, attention->hidden}, torch::kDouble);
  torch::Tensor mask = torch::ones({N, T}, torch::kBool);
  mask.index_put_({1, torch::indexing::Slice(6)}, false);
  torch::Tensor bias = square_bias(model->encoder_position_bias->table, T, /*bidirectional=*/true);
  bias = bias + torch::zeros({N, 1, 1, T}, torch::kDouble)
                    .masked_fill(mask.logical_not().view({N, 1, 1, T}), -std::numeric_limits<double>::infinity());
  torch::Tensor expected = reference_attention(attention->query, attention->key, attention->value, x, bias, heads);
  torch::Tensor got = attention->forward(x, mask);
  EXPECT_TRUE(torch::allclose(got, expected, 1e-10, 1e-12)) << (got - expected).abs().max().item<double>();
}

TEST(T5RelativeBias, DecoderSelfAttentionAddsTheCausalBuckets) {
  Seq2SeqModel model = t5_tiny();
  torch::NoGradGuard no_grad;
  CausalSelfAttentionImpl* attention = last_module<CausalSelfAttentionImpl>(*model->decoder);
  ASSERT_NE(attention, nullptr);
  ASSERT_TRUE(attention->position_bias);
  const int64_t T = 7, heads = attention->heads;
  torch::Tensor x = torch::randn({2, T, attention->hidden}, torch::kDouble);
  torch::Tensor future = torch::ones({T, T}, torch::kBool).triu(1);  // j > i
  torch::Tensor bias = square_bias(model->decoder_position_bias->table, T, /*bidirectional=*/false)
                           .masked_fill(future, -std::numeric_limits<double>::infinity());
  torch::Tensor expected = reference_attention(attention->query, attention->key, attention->value, x, bias, heads);
  EXPECT_TRUE(torch::allclose(attention->forward(x, {}), expected, 1e-10, 1e-12));
}

TEST(T5RelativeBias, OneTablePerStackWhateverTheDepth) {
  auto model = [](const std::string& preset, std::vector<std::string> sets) {
    sets.push_back("vocab_size=40");
    return Seq2SeqModel(config::load_model_config(preset, sets));
  };
  const std::vector<std::string> deeper = {"num_layers=4", "seq2seq.decoder_layers=4"};
  Seq2SeqModel t5_2 = model("t5-tiny", {}), t5_4 = model("t5-tiny", deeper);
  for (Seq2SeqModel* m : {&t5_2, &t5_4}) {
    int tables = 0;
    for (const auto& p : (*m)->named_parameters()) tables += p.key().find("position_bias") != std::string::npos;
    EXPECT_EQ(tables, 2);
  }
  // The same Transformer without T5's positions: two more layers per stack add layers only, and the positions
  // add heads x buckets for each stack, once.
  const std::vector<std::string> prenorm = {"seq2seq.normalize_before=true"};
  std::vector<std::string> prenorm_deeper = prenorm;
  prenorm_deeper.insert(prenorm_deeper.end(), deeper.begin(), deeper.end());
  Seq2SeqModel plain_2 = model("transformer-tiny", prenorm), plain_4 = model("transformer-tiny", prenorm_deeper);
  EXPECT_EQ(count_parameters(*t5_4) - count_parameters(*t5_2), count_parameters(*plain_4) - count_parameters(*plain_2));
  EXPECT_EQ(count_parameters(*t5_2) - count_parameters(*plain_2), 2 * 2 * 32);
}

TEST(T5RelativeBias, RefusesStacksWithoutSelfAttention) {
  try {
    Seq2SeqModel model(config::load_model_config(
        "t5-tiny", {"vocab_size=40", "seq2seq.decoder_family=LIGHTCONV", "seq2seq.decoder_kernel_sizes=3"}));
    FAIL() << "expected a refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("seq2seq.relative_buckets"), std::string::npos) << e.what();
  }
  EXPECT_THROW(config::load_model_config("t5-tiny", {"seq2seq.relative_buckets=5"}), UsageError);
}

}  // namespace
}  // namespace cabert::models
