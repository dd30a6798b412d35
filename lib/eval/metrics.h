// The metrics the papers report, computed the way the reference tools compute them (sklearn, scipy, the
// GLUE leaderboard), so that numbers from cabert can be put beside published ones.
// Percent-style metrics are returned as fractions (0..1); correlations in -1..1.
#pragma once

#include <cstdint>
#include <vector>

namespace cabert::eval {

// Fraction of positions where prediction == label. Throws Error on a length mismatch; 0 for empty input.
double accuracy(const std::vector<int>& predictions, const std::vector<int>& labels);

// Binary F1 of the class `positive` (GLUE MRPC/QQP: positive = 1). 0 when there are no true positives
// (sklearn's zero_division=0 convention).
double binary_f1(const std::vector<int>& predictions, const std::vector<int>& labels, int positive = 1);

// Unweighted mean of the per-class F1 over classes 0..num_classes-1 that occur in labels or predictions
// (sklearn f1_score(average="macro") with the label set inferred from the data).
double macro_f1(const std::vector<int>& predictions, const std::vector<int>& labels);

// Matthews correlation coefficient, multi-class form (Gorodkin 2004; equals the binary phi coefficient for
// two classes). 0 when the denominator is 0, e.g. everything predicted as one class (as sklearn does).
double matthews_corrcoef(const std::vector<int>& predictions, const std::vector<int>& labels);

// Pearson's r. 0 when either series is constant (undefined; scipy returns nan and warns).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

// 1-based ranks with ties given the average of the ranks they span (scipy.stats.rankdata "average").
std::vector<double> average_ranks(const std::vector<double>& values);

// Spearman's rho = Pearson's r of the average ranks.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// Mean and standard error of the mean (sample standard deviation / sqrt(n)); sem = 0 for n < 2.
struct MeanSem {
  double mean = 0, sem = 0;
  uint64_t n = 0;
};
MeanSem mean_and_sem(const std::vector<double>& values);

}  // namespace cabert::eval
