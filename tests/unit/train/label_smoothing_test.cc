// fairseq's label-smoothed cross-entropy by hand (values, PAD, eps = 0, gradient) and the inverse square-root
// learning-rate schedule.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "lib/train/losses.h"
#include "lib/train/schedule.h"

namespace cabert::train {
namespace {

TEST(LabelSmoothedCrossEntropy, MatchesAHandComputedToken) {
  // Position 0: p = 1/8, 2/8, 5/8, target 2. Position 1: PAD, with a huge logit away from index 0 so that it
  // would dominate both sums if it were counted.
  torch::Tensor logits = torch::tensor({{{0.0, std::log(2.0), std::log(5.0)}, {0.0, 0.0, 1000.0}}});
  torch::Tensor targets = torch::tensor({{2, 0}}, torch::kInt64);
  const double eps = 0.1, V = 3, off = eps / (V - 1), on = 1 - eps - off;
  const double nll = -std::log(5.0 / 8.0);
  const double smooth = -std::log(1.0 / 8.0) - std::log(2.0 / 8.0) - std::log(5.0 / 8.0);
  SmoothedLoss result = label_smoothed_cross_entropy(logits, targets, eps);
  ASSERT_EQ(result.loss.dim(), 0);
  ASSERT_EQ(result.nll.dim(), 0);
  EXPECT_NEAR(result.nll.item<double>(), nll, 1e-6);
  EXPECT_NEAR(result.loss.item<double>(), on * nll + off * smooth, 1e-6);
  EXPECT_NEAR(on * nll + off * smooth, 0.85 * std::log(1.6) + 0.05 * std::log(8.0 * 4.0 * 1.6), 1e-12);
}

TEST(LabelSmoothedCrossEntropy, SumsThePerTokenLossOverRealTokens) {
  torch::manual_seed(7);
  const int64_t N = 2, T = 4, V = 6;
  const double eps = 0.2;
  torch::Tensor logits = torch::randn({N, T, V}) * 3;
  torch::Tensor targets = torch::tensor({{1, 5, 2, 0}, {4, 0, 0, 0}}, torch::kInt64);
  auto z = logits.accessor<float, 3>();
  auto y = targets.accessor<int64_t, 2>();
  double loss = 0, nll = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t < T; ++t) {
      if (y[n][t] == 0) continue;
      double total = 0;
      for (int64_t v = 0; v < V; ++v) total += std::exp(static_cast<double>(z[n][t][v]));
      double token_nll = 0, smooth = 0;
      for (int64_t v = 0; v < V; ++v) {
        const double minus_log_p = std::log(total) - z[n][t][v];
        smooth += minus_log_p;
        if (v == y[n][t]) token_nll = minus_log_p;
      }
      nll += token_nll;
      loss += (1 - eps - eps / (V - 1)) * token_nll + eps / (V - 1) * smooth;
    }
  }
  SmoothedLoss result = label_smoothed_cross_entropy(logits, targets, eps);
  EXPECT_NEAR(result.nll.item<double>(), nll, 1e-5 * nll);
  EXPECT_NEAR(result.loss.item<double>(), loss, 1e-5 * loss);
}

TEST(LabelSmoothedCrossEntropy, WithoutSmoothingIsTheSummedCrossEntropyIgnoringPad) {
  torch::manual_seed(8);
  torch::Tensor logits = torch::randn({3, 5, 7});
  torch::Tensor targets = torch::randint(1, 7, {3, 5}, torch::kInt64);
  targets[0][4].fill_(0);
  targets[2].narrow(0, 2, 3).fill_(0);
  SmoothedLoss result = label_smoothed_cross_entropy(logits, targets, 0.0);
  namespace F = torch::nn::functional;
  torch::Tensor expected = F::cross_entropy(logits.view({-1, 7}), targets.view({-1}),
                                            F::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(0));
  EXPECT_TRUE(torch::allclose(result.loss, result.nll, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(result.nll, expected, 1e-5, 1e-5))
      << result.nll.item<double>() << " vs " << expected.item<double>();
}

TEST(LabelSmoothedCrossEntropy, GradientIsSoftmaxMinusTheSmoothedTarget) {
  // d/dz [a * -log p_y + b * sum_v -log p_v] = a (p - onehot_y) + b (V p - 1) = p - q, q = b + a onehot_y.
  const int64_t V = 5, y = 3;
  const double eps = 0.1, b = eps / (V - 1), a = 1 - eps - b;
  torch::Tensor logits =
      torch::tensor({{{0.3, -1.2, 2.0, 0.5, -0.7}, {1.0, 2.0, 3.0, 4.0, 5.0}}}, torch::kDouble).requires_grad_(true);
  torch::Tensor targets = torch::tensor({{y, int64_t{0}}}, torch::kInt64);  // second position is PAD
  label_smoothed_cross_entropy(logits, targets, eps).loss.backward();
  const std::vector<double> z = {0.3, -1.2, 2.0, 0.5, -0.7};
  double total = 0;
  for (double zv : z) total += std::exp(zv);
  for (int64_t v = 0; v < V; ++v) {
    const double p = std::exp(z[static_cast<size_t>(v)]) / total;
    const double expected = a * (p - (v == y ? 1.0 : 0.0)) + b * (V * p - 1);
    EXPECT_NEAR(logits.grad()[0][0][v].item<double>(), expected, 1e-6) << "v=" << v;
    EXPECT_EQ(logits.grad()[0][1][v].item<double>(), 0.0) << "PAD position, v=" << v;
  }
}

TEST(InverseSqrt, WarmsUpLinearlyThenDecaysWithTheInverseSquareRoot) {
  const double peak = 1e-3;
  const int64_t warmup = 4000;
  EXPECT_NEAR(inverse_sqrt(peak, 1, warmup), 2.5e-7, 1e-18);
  EXPECT_NEAR(inverse_sqrt(peak, 1000, warmup), 2.5e-4, 1e-15);
  EXPECT_NEAR(inverse_sqrt(peak, 2000, warmup), 5e-4, 1e-15);
  EXPECT_DOUBLE_EQ(inverse_sqrt(peak, warmup, warmup), peak);
  EXPECT_NEAR(inverse_sqrt(peak, 9000, warmup), peak * 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(inverse_sqrt(peak, 16000, warmup), 5e-4, 1e-15);
  EXPECT_NEAR(inverse_sqrt(peak, 400000, warmup), 1e-4, 1e-15);
  for (int64_t update = 1; update < 3 * warmup; update += 97) {
    const double lr = inverse_sqrt(peak, update, warmup);
    EXPECT_LE(lr, peak) << update;
    const double next = inverse_sqrt(peak, update + 1, warmup);
    if (update < warmup) {
      EXPECT_LT(lr, next) << update;  // rising during warm-up
    } else {
      EXPECT_GT(lr, next) << update;  // falling after it
    }
  }
}

}  // namespace
}  // namespace cabert::train
