// AdamW against the closed form of its first steps, weight-decay exclusions, the schedule and clipping.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/models/encoder.h"
#include "lib/models/presets.h"
#include "lib/train/optimizer.h"
#include "lib/train/pretraining_data.h"
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

TEST(AdamW, NoDecayOnBiasesAndLayerNorm) {
  models::Encoder encoder(models::preset_config("convbert-tiny"));
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

TEST(Schedule, ClipsTheGlobalNorm) {
  torch::Tensor a = torch::zeros({2}, torch::kDouble).requires_grad_(true);
  torch::Tensor b = torch::zeros({1}, torch::kDouble).requires_grad_(true);
  a.mutable_grad() = torch::tensor({3.0, 0.0}, torch::kDouble);
  b.mutable_grad() = torch::tensor({4.0}, torch::kDouble);
  EXPECT_NEAR(clip_gradients({a, b}, 1.0), 5.0, 1e-12);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-6);
  EXPECT_NEAR(b.grad()[0].item<double>(), 0.8, 1e-6);
}

TEST(Masking, EightyTenTenOverRegularTokensOnly) {
  const int64_t B = 64, T = 100;
  torch::Tensor ids = torch::randint(20, 1000, {B, T});
  ids.select(1, 0).fill_(2);  // [CLS]
  ids.select(1, 50).fill_(3);  // [SEP]
  torch::Tensor mask = torch::ones({B, T}, torch::kBool);
  mask.narrow(1, 90, 10).fill_(false);
  MaskingOptions options;
  options.vocab_size = 1000;
  options.first_regular_id = 20;
  std::mt19937_64 rng(1);
  MaskedBatch masked = mask_tokens(ids, mask, options, rng);
  const double selected = masked.positions.sum().item<double>();
  const double candidates = B * 88.0;
  EXPECT_NEAR(selected / candidates, 0.15, 0.015);
  EXPECT_FALSE(masked.positions.select(1, 0).any().item<bool>());
  EXPECT_FALSE(masked.positions.select(1, 50).any().item<bool>());
  EXPECT_FALSE(masked.positions.narrow(1, 90, 10).any().item<bool>());
  torch::Tensor inputs = masked.input_ids.index({masked.positions});
  EXPECT_TRUE(torch::equal(masked.labels, ids.index({masked.positions})));
  const double as_mask = inputs.eq(4).sum().item<double>() / selected;
  const double kept = inputs.eq(masked.labels).sum().item<double>() / selected;
  EXPECT_NEAR(as_mask, 0.8, 0.03);
  EXPECT_NEAR(kept, 0.1, 0.03);  // (+ random draws equal to the original: 1/980)
  EXPECT_TRUE(inputs.ne(4).logical_and(inputs.lt(20)).sum().item<int64_t>() == 0);  // no special ids drawn
  // Outside the selection nothing changes.
  EXPECT_TRUE(torch::equal(masked.input_ids.index({masked.positions.logical_not()}),
                           ids.index({masked.positions.logical_not()})));
}

TEST(Masking, ElectraCapsPredictions) {
  torch::Tensor ids = torch::randint(5, 100, {4, 20});
  torch::Tensor mask = torch::ones({4, 20}, torch::kBool);
  MaskingOptions options;
  options.vocab_size = 100, options.select = 0.9, options.mask_token = 0.85, options.random_token = 0;
  options.max_fraction = 0.155;
  std::mt19937_64 rng(2);
  MaskedBatch masked = mask_tokens(ids, mask, options, rng);
  for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(masked.positions[b].sum().item<int64_t>(), 3);  // int(0.155 x 20)
}

}  // namespace
}  // namespace cabert::train
