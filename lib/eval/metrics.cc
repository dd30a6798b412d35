#include "lib/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "lib/core/errors.h"

namespace cabert::eval {
namespace {

template <typename A, typename B>
void check_same_length(const A& a, const B& b, const char* what) {
  if (a.size() != b.size()) {
    throw Error(str(what, ": expected as many predictions as labels, got ", a.size(), " and ", b.size()));
  }
}

}  // namespace

double accuracy(const std::vector<int>& predictions, const std::vector<int>& labels) {
  check_same_length(predictions, labels, "accuracy");
  if (labels.empty()) return 0;
  uint64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += predictions[i] == labels[i];
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double binary_f1(const std::vector<int>& predictions, const std::vector<int>& labels, int positive) {
  check_same_length(predictions, labels, "F1");
  uint64_t tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    bool predicted = predictions[i] == positive, actual = labels[i] == positive;
    tp += predicted && actual;
    fp += predicted && !actual;
    fn += !predicted && actual;
  }
  if (tp == 0) return 0;
  return 2.0 * tp / (2.0 * tp + fp + fn);
}

double macro_f1(const std::vector<int>& predictions, const std::vector<int>& labels) {
  check_same_length(predictions, labels, "macro-F1");
  std::vector<int> classes(labels);
  classes.insert(classes.end(), predictions.begin(), predictions.end());
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  if (classes.empty()) return 0;
  double sum = 0;
  for (int c : classes) sum += binary_f1(predictions, labels, c);
  return sum / static_cast<double>(classes.size());
}

double matthews_corrcoef(const std::vector<int>& predictions, const std::vector<int>& labels) {
  check_same_length(predictions, labels, "Matthews correlation");
  // Gorodkin's R_K from the confusion matrix: (c*s - sum_k p_k t_k) /
  // sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)), c = correct, s = samples, p_k/t_k = predicted/true counts.
  std::map<int, double> predicted_count, true_count;
  double correct = 0, samples = static_cast<double>(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    predicted_count[predictions[i]] += 1;
    true_count[labels[i]] += 1;
    correct += predictions[i] == labels[i];
  }
  double pt = 0, pp = 0, tt = 0;
  for (const auto& [k, p] : predicted_count) {
    pp += p * p;
    auto t = true_count.find(k);
    if (t != true_count.end()) pt += p * t->second;
  }
  for (const auto& [k, t] : true_count) tt += t * t;
  double denominator = std::sqrt((samples * samples - pp) * (samples * samples - tt));
  if (denominator == 0) return 0;
  return (correct * samples - pt) / denominator;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_same_length(x, y, "Pearson correlation");
  size_t n = x.size();
  if (n == 0) return 0;
  // A constant series is undefined: tested exactly, since the rounding of its mean (0.1 ten times sums to
  // 0.9999999999999999) leaves deviations of ~1e-17 that would make a correlation of noise.
  auto constant = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [&](double value) { return value == v.front(); });
  };
  if (constant(x) || constant(y)) return 0;
  double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / n;
  double mean_y = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    double dx = x[i] - mean_x, dy = y[i] - mean_y;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    // Positions start..end-1 hold equal values: each gets the mean of ranks start+1..end.
    double rank = (static_cast<double>(start + 1) + static_cast<double>(end)) / 2.0;
    for (size_t i = start; i < end; ++i) ranks[order[i]] = rank;
    start = end;
  }
  return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_same_length(x, y, "Spearman correlation");
  return pearson(average_ranks(x), average_ranks(y));
}

MeanSem mean_and_sem(const std::vector<double>& values) {
  MeanSem result;
  result.n = values.size();
  if (values.empty()) return result;
  result.mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  if (values.size() < 2) return result;
  double squares = 0;
  for (double v : values) squares += (v - result.mean) * (v - result.mean);
  double sample_sd = std::sqrt(squares / (values.size() - 1));
  result.sem = sample_sd / std::sqrt(static_cast<double>(values.size()));
  return result;
}

}  // namespace cabert::eval
