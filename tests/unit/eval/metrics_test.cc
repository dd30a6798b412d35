#include "lib/eval/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lib/core/errors.h"

namespace cabert::eval {
namespace {

TEST(EvalMetrics, AccuracyCountsMatches) {
  EXPECT_DOUBLE_EQ(accuracy({1, 0, 1, 1}, {1, 1, 1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(accuracy({}, {}), 0.0);
  EXPECT_THROW(accuracy({1}, {1, 0}), Error);
}

TEST(EvalMetrics, BinaryF1ByHand) {
  // tp = 2 (positions 0, 3), fp = 1 (2), fn = 1 (1): F1 = 2*2 / (2*2 + 1 + 1) = 2/3.
  EXPECT_DOUBLE_EQ(binary_f1({1, 0, 1, 1, 0}, {1, 1, 0, 1, 0}), 2.0 / 3.0);
  // No true positives: 0, not NaN.
  EXPECT_DOUBLE_EQ(binary_f1({0, 0, 0}, {1, 1, 0}), 0.0);
  // Positive class is a parameter: class 0 here has tp 1 (4), fp 1 (1), fn 1 (2).
  EXPECT_DOUBLE_EQ(binary_f1({1, 0, 1, 1, 0}, {1, 1, 0, 1, 0}, 0), 0.5);
}

TEST(EvalMetrics, MatthewsDegenerateAllOneClassIsZero) {
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 1, 1, 1}, {1, 0, 1, 0}), 0.0);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 0, 1, 0}, {1, 1, 1, 1}), 0.0);
}

TEST(EvalMetrics, MatthewsBinaryByHand) {
  // tp 2, tn 1, fp 1, fn 0: (2*1 - 1*0) / sqrt(3 * 2 * 2 * 1) = 2 / sqrt(12).
  EXPECT_NEAR(matthews_corrcoef({1, 1, 1, 0}, {1, 1, 0, 0}), 2.0 / std::sqrt(12.0), 1e-12);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({1, 0, 1}, {1, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(matthews_corrcoef({0, 1, 0}, {1, 0, 1}), -1.0);
}

// Reference values computed once with scikit-learn 1.9.1 / scipy 1.17.1:
//   matthews_corrcoef(l, p), f1_score(l, p), f1_score(l, p, average="macro"), pearsonr, spearmanr, scipy.stats.sem.
TEST(EvalMetrics, AgreesWithSklearnAndScipy) {
  std::vector<int> p = {0, 1, 2, 2, 1, 0, 2, 1, 0, 0}, l = {0, 1, 1, 2, 1, 2, 2, 0, 0, 1};
  EXPECT_NEAR(matthews_corrcoef(p, l), 0.4090909090909091, 1e-12);
  EXPECT_NEAR(macro_f1(p, l), 0.6031746031746031, 1e-12);
  std::vector<int> pb = {1, 0, 1, 1, 0, 1, 0, 0, 1, 1}, lb = {1, 0, 0, 1, 0, 1, 1, 0, 1, 0};
  EXPECT_NEAR(matthews_corrcoef(pb, lb), 0.408248290463863, 1e-12);
  EXPECT_NEAR(binary_f1(pb, lb), 0.7272727272727273, 1e-12);
  std::vector<double> x = {1.0, 2.5, 2.5, 4.0, 3.0, 0.5, 5.0, 2.5}, y = {0.2, 1.9, 3.1, 3.9, 2.2, 0.1, 4.6, 2.0};
  EXPECT_NEAR(pearson(x, y), 0.9600112480373509, 1e-12);
  EXPECT_NEAR(spearman(x, y), 0.9271050693011065, 1e-12);
  MeanSem ms = mean_and_sem({81.2, 79.5, 80.1, 82.0});
  EXPECT_NEAR(ms.mean, 80.7, 1e-12);
  EXPECT_NEAR(ms.sem, 0.5582711408148082, 1e-12);
  EXPECT_EQ(ms.n, 4u);
}

TEST(EvalMetrics, AverageRanksForTies) {
  // 10 < 20 = 20 = 20 < 30 < 40 = 40: ranks 1, (2+3+4)/3 = 3, 5, (6+7)/2 = 6.5.
  std::vector<double> ranks = average_ranks({20, 40, 10, 20, 30, 40, 20});
  std::vector<double> expected = {3, 6.5, 1, 3, 5, 6.5, 3};
  EXPECT_EQ(ranks, expected);
}

TEST(EvalMetrics, SpearmanWithTiesByHand) {
  // x ranks (1, 2.5, 2.5, 4), y ranks (1, 2, 3, 4): Pearson of those = 4.5 / sqrt(4.5 * 5).
  EXPECT_NEAR(spearman({1, 2, 2, 3}, {10, 20, 30, 40}), 4.5 / std::sqrt(4.5 * 5), 1e-12);
  // Monotone but non-linear: rho 1 although r < 1.
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0);
  EXPECT_LT(pearson({1, 2, 3, 4}, {1, 8, 27, 64}), 1.0);
}

TEST(EvalMetrics, PearsonOfConstantIsZero) {
  EXPECT_DOUBLE_EQ(pearson({1, 1, 1}, {1, 2, 3}), 0.0);
  // 0.1 ten times: the mean rounds to 0.09999999999999999, and the deviations are not zero.
  std::vector<double> constant(10, 0.1), gold = {0.5, 3, 5, 2.2, 1, 4, 4.5, 0, 2, 3.3};
  EXPECT_EQ(pearson(constant, gold), 0.0);
  EXPECT_EQ(pearson(gold, constant), 0.0);
}

TEST(EvalMetrics, MeanSemOfOneValueHasNoError) {
  MeanSem ms = mean_and_sem({3.0});
  EXPECT_DOUBLE_EQ(ms.mean, 3.0);
  EXPECT_DOUBLE_EQ(ms.sem, 0.0);
}

}  // namespace
}  // namespace cabert::eval
