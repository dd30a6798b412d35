// MLM and ELECTRA masking (moved from the optimizer tests with lib/data/masking.h, assertions unchanged).
#include <gtest/gtest.h>

#include <random>

#include "lib/data/masking.h"

namespace cabert::data {
namespace {

TEST(Masking, EightyTenTenOverRegularTokensOnly) {
  const int64_t B = 64, T = 100;
  torch::Tensor ids = torch::randint(20, 1000, {B, T});
  ids.select(1, 0).fill_(2);   // [CLS]
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
}  // namespace cabert::data
