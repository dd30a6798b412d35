// The facts of a key mask the attention routes branch on, and how long an answer is kept.
#include "kernels/key_mask_facts.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <utility>
#include <vector>

namespace cabert {
namespace {

using kernels::key_mask_facts;

at::Tensor mask_of(std::vector<std::vector<int>> rows) {
  at::Tensor mask =
      torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, torch::kBool);
  for (size_t b = 0; b < rows.size(); ++b) {
    for (size_t t = 0; t < rows[b].size(); ++t) mask.index_put_({int64_t(b), int64_t(t)}, rows[b][t] != 0);
  }
  return mask;
}

TEST(KeyMaskFacts, KeylessRowsAndMaskedKeysOfRowsWithKeys) {
  const auto facts = [](std::vector<std::vector<int>> rows) {
    const kernels::KeyMaskFacts f = key_mask_facts(mask_of(rows));
    return std::make_pair(f.keyless_row, f.masked_key);
  };
  EXPECT_EQ(facts({{1, 1, 1}, {1, 1, 1}}), std::make_pair(false, false));
  EXPECT_EQ(facts({{1, 1, 0}, {1, 1, 1}}), std::make_pair(false, true));
  EXPECT_EQ(facts({{0, 0, 0}, {1, 1, 1}}), std::make_pair(true, false));  // a keyless row's keys are not "masked"
  EXPECT_EQ(facts({{0, 0, 0}, {0, 1, 1}}), std::make_pair(true, true));
}

// The answers are kept for that tensor and version: a write that bypasses the version counter is not seen (how
// the test tells a kept answer from a new one), an in-place op is, and another tensor of the same contents gets
// its own.
TEST(KeyMaskFacts, KeptForTheMaskUntilItChanges) {
  at::Tensor mask = torch::ones({3, 5}, torch::kBool);
  EXPECT_FALSE(key_mask_facts(mask).keyless_row);
  for (int64_t k = 0; k < 5; ++k) mask.data_ptr<bool>()[5 + k] = false;  // row 1 keyless, the version unchanged
  EXPECT_FALSE(key_mask_facts(mask).keyless_row) << "the kept answer";
  EXPECT_TRUE(key_mask_facts(mask.clone()).keyless_row) << "another tensor";
  mask.index_put_({2, 0}, false);  // an in-place op: a new version
  EXPECT_TRUE(key_mask_facts(mask).keyless_row);
  EXPECT_TRUE(key_mask_facts(mask).masked_key);
  mask.index_put_({1, 3}, true);
  EXPECT_FALSE(key_mask_facts(mask).keyless_row);
  {
    c10::InferenceMode inference;  // no version counter: asked every time
    at::Tensor unversioned = torch::ones({2, 4}, torch::kBool);
    EXPECT_FALSE(key_mask_facts(unversioned).keyless_row);
    for (int64_t k = 0; k < 4; ++k) unversioned.data_ptr<bool>()[k] = false;
    EXPECT_TRUE(key_mask_facts(unversioned).keyless_row);
  }
}

}  // namespace
}  // namespace cabert
