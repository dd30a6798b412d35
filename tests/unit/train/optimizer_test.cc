// AdamW against the closed form of its first steps, weight-decay exclusions, the schedule and clipping.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/models/encoder.h"
#include "lib/train/optimizer.h"
#include "lib/train/schedule.h"

namespace cabert::train {
namespace {

TEST(AdamW, MatchesTheUpdateRuleByHand) {
  torch::Tensor w = torch::tensor({1.0, -2.0}, torch::kDouble).requires_grad_(true);
  torch::Tensor b = torch::tensor({0.5}, torch::kDouble).requires_grad_(true);
  AdamWOptions options;
  options.lr = 0.1, options.weight_decay = 0.5, options.eps = 1e-8;
  AdamW adam({{"w", w}, {"bias", b}}, {"bias"}, options);
  double wv = 1.0, bv = 0.5, m = 0, v = 0, mb = 0, vb = 0;
  for (int t = 1; t <= 3; ++t) {
    adam.zero_grad();
    (w[0] * w[0] * 3.0 + b[0] * 2.0).backward();
    const double g = 6.0 * wv, gb = 2.0;
    wv *= 1 - 0.1 * 0.5;  // decoupled decay, not for the bias
    m = 0.9 * m + 0.1 * g, v = 0.999 * v + 0.001 * g * g;
    mb = 0.9 * mb + 0.1 * gb, vb = 0.999 * vb + 0.001 * gb * gb;
    const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.999, t);
    wv -= 0.1 / c1 * m / (std::sqrt(v) / std::sqrt(c2) + 1e-8);
    bv -= 0.1 / c1 * mb / (std::sqrt(vb) / std::sqrt(c2) + 1e-8);
    adam.step();
    EXPECT_NEAR(w[0].item<double>(), wv, 1e-12) << "step " << t;
    EXPECT_NEAR(b[0].item<double>(), bv, 1e-12) << "step " << t;
  }
}

// Parameters the fused kernel cannot take (a transposed, non-contiguous one) take the same update op by op; a
// parameter without a gradient is left alone; the decaying and the non-decaying ones are separate fused calls.
TEST(AdamW, EveryParameterKindTakesTheUpdateRule) {
  torch::Tensor dense = torch::tensor({{1.0, -2.0}, {0.25, 3.0}}, torch::kDouble).requires_grad_(true);
  torch::Tensor transposed =
      torch::tensor({{1.0, 0.25}, {-2.0, 3.0}}, torch::kDouble).t().detach().requires_grad_(true);
  torch::Tensor bias = torch::tensor({0.5, -1.5}, torch::kDouble).requires_grad_(true);
  torch::Tensor unused = torch::tensor({7.0}, torch::kDouble).requires_grad_(true);
  ASSERT_FALSE(transposed.is_contiguous());
  AdamWOptions options;
  options.lr = 0.05, options.weight_decay = 0.3, options.eps = 1e-8;
  AdamW adam({{"dense", dense}, {"transposed", transposed}, {"bias", bias}, {"unused", unused}}, {"bias"}, options);
  const torch::Tensor target = torch::tensor({{0.5, 1.0}, {-1.0, 2.0}}, torch::kDouble);
  auto by_hand = [&](torch::Tensor value, bool decay) {  // the closed form of AdamW on the loss below
    torch::Tensor m = torch::zeros_like(value), v = torch::zeros_like(value);
    std::vector<torch::Tensor> values;
    for (int t = 1; t <= 4; ++t) {
      const torch::Tensor g = 2.0 * (value - target.narrow(0, 0, value.size(0)).reshape(value.sizes())) * value.abs();
      if (decay) value = value * (1 - 0.05 * 0.3);
      m = 0.9 * m + 0.1 * g, v = 0.999 * v + 0.001 * g * g;
      const double c1 = 1 - std::pow(0.9, t), c2 = 1 - std::pow(0.999, t);
      value = value - 0.05 / c1 * m / (v.sqrt() / std::sqrt(c2) + 1e-8);
      values.push_back(value);
    }
    return values;
  };
  const auto dense_values = by_hand(dense.detach().clone(), true);
  const auto transposed_values = by_hand(transposed.detach().clone(), true);
  const auto bias_values = by_hand(bias.detach().clone().view({1, 2}), false);
  auto loss_of = [&](const torch::Tensor& p) {  // gradient 2 (p - target) |p|, as by_hand takes it
    const torch::Tensor fixed = p.detach().abs();
    return ((p - target.narrow(0, 0, p.size(0)).reshape(p.sizes())).pow(2) * fixed).sum();
  };
  for (int t = 0; t < 4; ++t) {
    adam.zero_grad();
    (loss_of(dense) + loss_of(transposed) + loss_of(bias.view({1, 2}))).backward();
    adam.step();
    EXPECT_TRUE(torch::allclose(dense.detach(), dense_values[t], 0, 1e-12)) << "step " << t + 1;
    EXPECT_TRUE(torch::allclose(transposed.detach(), transposed_values[t], 0, 1e-12)) << "step " << t + 1;
    EXPECT_TRUE(torch::allclose(bias.detach().view({1, 2}), bias_values[t], 0, 1e-12)) << "step " << t + 1;
  }
  EXPECT_FALSE(transposed.is_contiguous());
  EXPECT_EQ(unused.item<double>(), 7.0);
  EXPECT_EQ(adam.steps(), 4);
}

TEST(AdamW, NoDecayOnBiasesAndLayerNorm) {
  models::Encoder encoder(config::preset_config("convbert-tiny"));
  AdamW adam(*encoder, {});
  EXPECT_FALSE(adam.decays("embeddings.norm.weight"));
  EXPECT_FALSE(adam.decays("embeddings.norm.bias"));
  EXPECT_FALSE(adam.decays("stack.layers.0.attention.query.bias"));
  EXPECT_FALSE(adam.decays("stack.layers.0.ffn_norm.weight"));
  EXPECT_TRUE(adam.decays("stack.layers.0.attention.query.weight"));
  EXPECT_TRUE(adam.decays("stack.layers.0.attention.key_conv.depthwise_weight"));
  EXPECT_TRUE(adam.decays("embeddings.token.weight"));
}

TEST(Schedule, LinearWarmupThenDecay) {
  EXPECT_DOUBLE_EQ(linear_warmup_decay(1.0, 1, 10, 110), 0.1);
  EXPECT_DOUBLE_EQ(linear_warmup_decay(1.0, 10, 10, 110), 1.0);
  EXPECT_DOUBLE_EQ(linear_warmup_decay(1.0, 60, 10, 110), 0.5);
  EXPECT_DOUBLE_EQ(linear_warmup_decay(1.0, 110, 10, 110), 0.0);
  EXPECT_DOUBLE_EQ(linear_warmup_decay(2.0, 5, 0, 10), 1.0);
}

TEST(Schedule, WarmupThenConstant) {
  EXPECT_DOUBLE_EQ(warmup_then_constant(1e-3, 5, 10), 5e-4);
  EXPECT_DOUBLE_EQ(warmup_then_constant(1e-3, 10, 10), 1e-3);
  EXPECT_DOUBLE_EQ(warmup_then_constant(1e-3, 11, 10), 1e-3);
  EXPECT_DOUBLE_EQ(warmup_then_constant(1e-3, 1000000, 10), 1e-3);
  EXPECT_DOUBLE_EQ(warmup_then_constant(1e-3, 1, 0), 1e-3);
}

TEST(Schedule, CosineAsFairseqsWithOnePeriod) {
  EXPECT_DOUBLE_EQ(cosine(1e-3, 50, 100, 200, 1e-7), 5e-4);                  // warm-up
  EXPECT_DOUBLE_EQ(cosine(1e-3, 100, 100, 200, 1e-7), 1e-3);                 // peak at the end of warm-up
  EXPECT_NEAR(cosine(1e-3, 200, 100, 200, 1e-7), (1e-3 + 1e-7) / 2, 1e-15);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(cosine(1e-3, 299, 100, 200, 1e-7), 1e-7 + (1e-3 - 1e-7) * (1 + std::cos(M_PI * 199 / 200)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(cosine(1e-3, 300, 100, 200, 1e-7), 1e-3);  // the next period restarts at the peak
  for (int64_t u = 101; u < 299; ++u) EXPECT_LT(cosine(1e-3, u + 1, 100, 200, 0), cosine(1e-3, u, 100, 200, 0)) << u;
}

// Translation's warm-up: given, else recorded by the run being resumed, else fairseq's 4000 capped at half the
// run; an older checkpoint without a record resumes with the old rule, min(4000, 10%).
TEST(Schedule, TranslationWarmupRule) {
  EXPECT_EQ(translation_warmup(-1, 300).updates, 150);
  EXPECT_EQ(translation_warmup(-1, 301).updates, 150);
  EXPECT_EQ(translation_warmup(-1, 8000).updates, 4000);
  EXPECT_EQ(translation_warmup(-1, 300000).updates, 4000);
  EXPECT_EQ(translation_warmup(-1, 300).rule, "min(4000, half the updates)");
  EXPECT_EQ(translation_warmup(600, 300).updates, 600);
  EXPECT_EQ(translation_warmup(0, 300).updates, 0);
  EXPECT_EQ(translation_warmup(600, 300, 150, true).updates, 600);  // given wins over recorded
  EXPECT_EQ(translation_warmup(-1, 900, 150, true).updates, 150);   // a run extended from 300 to 900 updates
  EXPECT_EQ(translation_warmup(-1, 900, 150, true).rule, "the resumed run's");
  EXPECT_EQ(translation_warmup(-1, 300, -1, true).updates, 30);
  EXPECT_EQ(translation_warmup(-1, 300000, -1, true).updates, 4000);
}

TEST(Schedule, ClipsTheGlobalNorm) {
  torch::Tensor a = torch::zeros({2}, torch::kDouble).requires_grad_(true);
  torch::Tensor b = torch::zeros({1}, torch::kDouble).requires_grad_(true);
  a.mutable_grad() = torch::tensor({3.0, 0.0}, torch::kDouble);
  b.mutable_grad() = torch::tensor({4.0}, torch::kDouble);
  EXPECT_NEAR(clip_gradients({a, b}, 1.0), 5.0, 1e-12);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-6);
  EXPECT_NEAR(b.grad()[0].item<double>(), 0.8, 1e-6);
}

}  // namespace
}  // namespace cabert::train
