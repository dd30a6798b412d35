// The control beside ELECTRA's replaced-token-detection accuracy: predicting "original" everywhere.
#include <gtest/gtest.h>

#include <algorithm>

#include "lib/train/pretraining_objectives.h"

namespace cabert::train {
namespace {

// A hand-made held-out batch of 2 x 5 positions, the last of the second row padding (weight 0): the generator
// replaced 3 of the 9 real tokens (and the padding, which must not count). A discriminator that says "original"
// everywhere is right on 6 of 9.
TEST(RtdControl, TrivialAccuracyIsOneMinusTheReplacedFractionOfRealTokens) {
  const double replaced[2][5] = {{1, 0, 0, 1, 0}, {0, 0, 1, 0, 1}};
  const double weight[2][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 0}};
  double replaced_real = 0, real = 0;
  for (int row = 0; row < 2; ++row) {
    for (int column = 0; column < 5; ++column) {
      replaced_real += replaced[row][column] * weight[row][column];
      real += weight[row][column];
    }
  }
  std::map<std::string, double> sums = {{"mlm_loss_sum", 2.0}, {"mlm_count", 4.0}, {"mlm_correct", 1.0},
                                        {"rtd_loss_sum", 1.0}, {"rtd_batches", 1.0}, {"rtd_correct", 8.0},
                                        {"rtd_count", real},   {"rtd_replaced", replaced_real}};
  const auto values = summarise(sums, Objective::kElectra);
  EXPECT_DOUBLE_EQ(values.at("rtd_trivial_accuracy"), 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(values.at("rtd_accuracy"), 8.0 / 9.0);
  // The sums are all-reduced across ranks, so the control's must be among them.
  const auto names = metric_sum_names(Objective::kElectra);
  EXPECT_NE(std::find(names.begin(), names.end(), "rtd_replaced"), names.end());
  EXPECT_EQ(summarise(sums, Objective::kMlm).count("rtd_trivial_accuracy"), 0u);
}

}  // namespace
}  // namespace cabert::train
