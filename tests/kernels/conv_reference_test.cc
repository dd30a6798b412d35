// The reference ops against naive loops written straight from the formulas of lib/ops/conv_ops.h.
#include "kernels/reference/conv_reference.h"

#include <gtest/gtest.h>

#include "lib/core/errors.h"
#include "lib/ops/conv_ops.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert {
namespace {

using testing::f64;
using torch::indexing::Slice;

// out[b, t, c] = m[t] * sum_k w(b, t, c, k) * m[s] * x[b, s, c], s = t + k - pad.
template <typename WeightAt>
torch::Tensor naive_conv(const torch::Tensor& x, int64_t kernel_size, int64_t pad, const torch::Tensor& mask,
                         WeightAt weight_at) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  auto out = torch::zeros_like(x);
  auto xa = x.accessor<double, 3>();
  auto oa = out.accessor<double, 3>();
  auto real = [&](int64_t b, int64_t t) { return !mask.defined() || mask[b][t].item<bool>(); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      if (!real(b, t)) continue;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < kernel_size; ++k) {
          const int64_t s = t + k - pad;
          if (s < 0 || s >= T || !real(b, s)) continue;
          oa[b][t][c] += weight_at(b, t, c, k) * xa[b][s][c];
        }
    }
  return out;
}

TEST(ConvReference, LightweightMatchesNaiveLoops) {
  torch::manual_seed(1);
  for (int64_t K : {1, 2, 3, 4, 7}) {
    for (int64_t pad : {K / 2, K - 1}) {
      auto x = torch::randn({2, 5, 6}, f64());
      auto w = torch::randn({3, K}, f64());
      auto mask = torch::tensor({1, 1, 1, 0, 1, 1, 1, 1, 0, 0}, torch::kBool).view({2, 5});
      auto expected = naive_conv(x, K, pad, mask,
                                 [&](int64_t, int64_t, int64_t c, int64_t k) { return w[c / 2][k].item<double>(); });
      EXPECT_TRUE(torch::allclose(kernels::reference::lightweight_conv(x, w, pad, mask), expected))
          << "K=" << K << " pad=" << pad;
    }
  }
}

TEST(ConvReference, DynamicMatchesNaiveLoops) {
  torch::manual_seed(2);
  for (int64_t K : {1, 4, 5, 9}) {
    for (int64_t pad : {K / 2, K - 1}) {
      auto x = torch::randn({2, 4, 4}, f64());
      auto kern = torch::randn({2, 4, 2, K}, f64());
      auto expected = naive_conv(x, K, pad, {}, [&](int64_t b, int64_t t, int64_t c, int64_t k) {
        return kern[b][t][c / 2][k].item<double>();
      });
      EXPECT_TRUE(torch::allclose(kernels::reference::dynamic_conv(x, kern, pad, {}), expected))
          << "K=" << K << " pad=" << pad;
    }
  }
}

TEST(ConvReference, DepthwiseMatchesNaiveLoopsWithBiasAtRealPositionsOnly) {
  torch::manual_seed(3);
  for (int64_t K : {2, 3, 6}) {
    auto x = torch::randn({2, 4, 3}, f64());
    auto w = torch::randn({3, K}, f64());
    auto bias = torch::randn({3}, f64());
    auto mask = torch::tensor({1, 1, 0, 0, 1, 1, 1, 1}, torch::kBool).view({2, 4});
    auto expected =
        naive_conv(x, K, K / 2, mask, [&](int64_t, int64_t, int64_t c, int64_t k) { return w[c][k].item<double>(); });
    expected += bias.view({1, 1, 3}) * mask.unsqueeze(-1).to(torch::kDouble);
    EXPECT_TRUE(torch::allclose(kernels::reference::depthwise_conv(x, w, bias, K / 2, mask), expected)) << K;
  }
}

TEST(ConvReference, RelativePositionScoresMatchNaiveLoops) {
  torch::manual_seed(4);
  const int64_t B = 2, N = 3, T = 6, d = 4, n = 2;
  auto q = torch::randn({B, N, T, d}, f64());
  auto w = torch::randn({2 * n + 1, d}, f64());
  auto beta = torch::randn({N, 2 * n + 1}, f64());
  auto out = kernels::reference::relative_position_scores(q, w, beta, n, 0.5);
  auto only_beta = kernels::reference::relative_position_scores(q, {}, beta, n, 0.5);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{B, N, T, T}));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          const int64_t r = std::min(std::max(j - i, -n), n) + n;
          const double bias = beta[h][r].item<double>();
          const double expected = (q[b][h][i] * w[r]).sum().item<double>() * 0.5 + bias;
          EXPECT_NEAR(out[b][h][i][j].item<double>(), expected, 1e-12);
          EXPECT_NEAR(only_beta[b][h][i][j].item<double>(), bias, 1e-12);
        }
}

TEST(ConvReference, BadArgumentsAreUsageErrors) {
  auto x = torch::randn({1, 4, 6});
  EXPECT_THROW(kernels::reference::lightweight_conv(x, torch::randn({4, 3}), 1, {}), UsageError);  // 6 % 4
  EXPECT_THROW(kernels::reference::lightweight_conv(x, torch::randn({2, 3}), 3, {}), UsageError);  // pad > K-1
  EXPECT_THROW(kernels::reference::dynamic_conv(x, torch::randn({1, 5, 2, 3}), 1, {}), UsageError);
  try {
    kernels::reference::depthwise_conv(x, torch::randn({5, 3}), {}, 1, {});
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "depthwise_conv: expected weight of shape [6, K], got [5, 3]");
  }
  EXPECT_THROW(ops::parse_kernel_path("fast"), UsageError);
  EXPECT_EQ(ops::parse_kernel_path("reference"), ops::KernelPath::kReference);
}

}  // namespace
}  // namespace cabert
