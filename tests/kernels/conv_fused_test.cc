// Every fused op against the plain-ATen reference, forward and all gradients, in double, over odd and even K,
// K > T, causal and centred (and zero) padding, padding masks, batch 1, T = 1; finite-difference gradient
// checks on tiny shapes; float agreement; argument errors.
#include <gtest/gtest.h>

#include "kernels/reference/conv_reference.h"
#include "lib/core/errors.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/span_dynamic_conv.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert {
namespace {

using ops::KernelPath;
using testing::ConvCase;
using testing::expect_same;
using testing::f64;
using testing::Op;
using testing::OpRun;
using testing::ragged_mask;
using testing::run_on_path;

// The grid of the fused-vs-reference tests (the GPU tests add T=40 and K=31).
std::vector<ConvCase> case_grid() { return testing::conv_cases({1, 2, 5, 9}, {1, 2, 3, 4, 7, 12}); }

TEST(FusedConv, LightweightMatchesReference) {
  torch::manual_seed(11);
  const int64_t C = 6, H = 3;
  for (const ConvCase& c : case_grid()) {
    auto mask = c.masked ? ragged_mask(c.batch, c.length) : torch::Tensor();
    Op op = [&](const std::vector<torch::Tensor>& in) { return ops::lightweight_conv(in[0], in[1], c.pad, mask); };
    std::vector<torch::Tensor> inputs = {torch::randn({c.batch, c.length, C}, f64()),
                                         torch::randn({H, c.kernel_size}, f64())};
    auto probe = torch::randn({c.batch, c.length, C}, f64());
    expect_same(run_on_path(KernelPath::kFused, op, inputs, probe),
                run_on_path(KernelPath::kReference, op, inputs, probe), "lightweight " + c.name());
  }
}

TEST(FusedConv, DynamicMatchesReference) {
  torch::manual_seed(12);
  for (int64_t H : {1, 2}) {
    const int64_t C = 4;
    for (const ConvCase& c : case_grid()) {
      auto mask = c.masked ? ragged_mask(c.batch, c.length) : torch::Tensor();
      Op op = [&](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], c.pad, mask); };
      std::vector<torch::Tensor> inputs = {torch::randn({c.batch, c.length, C}, f64()),
                                           torch::randn({c.batch, c.length, H, c.kernel_size}, f64())};
      auto probe = torch::randn({c.batch, c.length, C}, f64());
      expect_same(run_on_path(KernelPath::kFused, op, inputs, probe),
                  run_on_path(KernelPath::kReference, op, inputs, probe),
                  "dynamic H=" + std::to_string(H) + " " + c.name());
    }
  }
}

TEST(FusedConv, SpanDynamicMatchesReference) {
  torch::manual_seed(16);
  const int64_t C = 4, H = 2;
  for (const ConvCase& c : case_grid()) {
    auto mask = c.masked ? ragged_mask(c.batch, c.length) : torch::Tensor();
    Op op = [&](const std::vector<torch::Tensor>& in) {
      return ops::span_dynamic_conv(in[0], in[1], in[2], in[3], in[4], H, c.pad, mask);
    };
    std::vector<torch::Tensor> inputs = {
        torch::randn({c.batch, c.length, C}, f64()), torch::randn({c.batch, c.length, C}, f64()),
        torch::randn({c.batch, c.length, C}, f64()), torch::randn({H * c.kernel_size, C}, f64()),
        torch::randn({H * c.kernel_size}, f64())};
    auto probe = torch::randn({c.batch, c.length, C}, f64());
    expect_same(run_on_path(KernelPath::kFused, op, inputs, probe),
                run_on_path(KernelPath::kReference, op, inputs, probe), "span dynamic " + c.name());
  }
}

// SDConv(Q, Ks, V)[b, i, c] = sum_j softmax_j(W_f (Q * Ks)[b, i] + b_f)[h(c), j] * V[b, i + j - pad, c], written
// out with scalar loops (Jiang et al. 2020, eq. 4-5).
TEST(FusedConv, SpanDynamicFollowsTheEquation) {
  torch::manual_seed(17);
  const int64_t B = 2, T = 5, C = 4, H = 2, K = 3, pad = 1;
  auto q = torch::randn({B, T, C}, f64()), ks = torch::randn({B, T, C}, f64()), v = torch::randn({B, T, C}, f64());
  auto wf = torch::randn({H * K, C}, f64()), bf = torch::randn({H * K}, f64());
  auto out = ops::span_dynamic_conv(q, ks, v, wf, bf, H, pad);
  auto Q = q.accessor<double, 3>(), S = ks.accessor<double, 3>(), V = v.accessor<double, 3>();
  auto W = wf.accessor<double, 2>();
  auto Bf = bf.accessor<double, 1>();
  auto O = out.accessor<double, 3>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t h = 0; h < H; ++h) {
        double logits[K], total = 0;
        for (int64_t j = 0; j < K; ++j) {
          logits[j] = Bf[h * K + j];
          for (int64_t e = 0; e < C; ++e) logits[j] += W[h * K + j][e] * Q[b][i][e] * S[b][i][e];
          total += std::exp(logits[j]);
        }
        for (int64_t c = h * (C / H); c < (h + 1) * (C / H); ++c) {
          double expected = 0;
          for (int64_t j = 0; j < K; ++j) {
            const int64_t s = i + j - pad;
            if (s >= 0 && s < T) expected += std::exp(logits[j]) / total * V[b][s][c];
          }
          EXPECT_NEAR(O[b][i][c], expected, 1e-12) << "b=" << b << " i=" << i << " c=" << c;
        }
      }
}

TEST(FusedConv, DepthwiseMatchesReferenceWithAndWithoutBias) {
  torch::manual_seed(13);
  const int64_t C = 5;
  for (bool with_bias : {true, false}) {
    for (const ConvCase& c : case_grid()) {
      auto mask = c.masked ? ragged_mask(c.batch, c.length) : torch::Tensor();
      Op op = [&](const std::vector<torch::Tensor>& in) {
        return ops::depthwise_conv(in[0], in[1], with_bias ? in[2] : torch::Tensor(), c.pad, mask);
      };
      std::vector<torch::Tensor> inputs = {torch::randn({c.batch, c.length, C}, f64()),
                                           torch::randn({C, c.kernel_size}, f64()), torch::randn({C}, f64())};
      auto probe = torch::randn({c.batch, c.length, C}, f64());
      expect_same(run_on_path(KernelPath::kFused, op, inputs, probe),
                  run_on_path(KernelPath::kReference, op, inputs, probe),
                  std::string("depthwise ") + (with_bias ? "bias " : "") + c.name());
    }
  }
}

// Wide channel counts cross the CPU kernels' 64-channel blocks and are not multiples of the vector width.
TEST(FusedConv, WideChannelBlocksMatchReference) {
  torch::manual_seed(14);
  const int64_t B = 2, T = 7, C = 150, K = 5;
  auto mask = ragged_mask(B, T);
  auto probe = torch::randn({B, T, C}, f64());
  Op light = [&](const std::vector<torch::Tensor>& in) { return ops::lightweight_conv(in[0], in[1], 2, mask); };
  std::vector<torch::Tensor> light_in = {torch::randn({B, T, C}, f64()), torch::randn({3, K}, f64())};
  expect_same(run_on_path(KernelPath::kFused, light, light_in, probe),
              run_on_path(KernelPath::kReference, light, light_in, probe), "lightweight C=150");
  Op dynamic = [&](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], 4, mask); };
  std::vector<torch::Tensor> dynamic_in = {torch::randn({B, T, C}, f64()), torch::randn({B, T, 2, K}, f64())};
  expect_same(run_on_path(KernelPath::kFused, dynamic, dynamic_in, probe),
              run_on_path(KernelPath::kReference, dynamic, dynamic_in, probe), "dynamic C=150");
  Op depthwise = [&](const std::vector<torch::Tensor>& in) {
    return ops::depthwise_conv(in[0], in[1], in[2], 4, mask);
  };
  std::vector<torch::Tensor> depthwise_in = {torch::randn({B, T, C}, f64()), torch::randn({C, 9}, f64()),
                                             torch::randn({C}, f64())};
  expect_same(run_on_path(KernelPath::kFused, depthwise, depthwise_in, probe),
              run_on_path(KernelPath::kReference, depthwise, depthwise_in, probe), "depthwise C=150 K=9");
}

TEST(FusedConv, RelativePositionScoresMatchReference) {
  torch::manual_seed(15);
  const int64_t N = 2, d = 3;
  for (int64_t batch : {1, 2})
    for (int64_t length : {1, 2, 6})
      for (int64_t radius : {0, 1, 2, 8})
        for (int which = 0; which < 3; ++which) {  // 0: w and beta, 1: w only, 2: beta only
          const bool use_w = which != 2, use_beta = which != 1;
          Op op = [&](const std::vector<torch::Tensor>& in) {
            return ops::relative_position_scores(in[0], use_w ? in[1] : torch::Tensor(),
                                                 use_beta ? in[2] : torch::Tensor(), radius, 0.7);
          };
          std::vector<torch::Tensor> inputs = {torch::randn({batch, N, length, d}, f64()),
                                               torch::randn({2 * radius + 1, d}, f64()),
                                               torch::randn({N, 2 * radius + 1}, f64())};
          auto probe = torch::randn({batch, N, length, length}, f64());
          expect_same(run_on_path(KernelPath::kFused, op, inputs, probe),
                      run_on_path(KernelPath::kReference, op, inputs, probe),
                      "relpos B=" + std::to_string(batch) + " T=" + std::to_string(length) +
                          " n=" + std::to_string(radius) + " variant " + std::to_string(which));
        }
}

TEST(FusedConv, FloatAgreesWithReference) {
  torch::manual_seed(16);
  auto mask = ragged_mask(2, 33);
  auto x = torch::randn({2, 33, 64});
  auto probe = torch::randn({2, 33, 64});
  Op dynamic = [&](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], 8, mask); };
  std::vector<torch::Tensor> inputs = {x, torch::randn({2, 33, 4, 17}).softmax(-1)};
  expect_same(run_on_path(KernelPath::kFused, dynamic, inputs, probe),
              run_on_path(KernelPath::kReference, dynamic, inputs, probe), "dynamic float", 1e-4);
  Op light = [&](const std::vector<torch::Tensor>& in) { return ops::lightweight_conv(in[0], in[1], 16, mask); };
  inputs = {x, torch::randn({4, 17}).softmax(-1)};
  expect_same(run_on_path(KernelPath::kFused, light, inputs, probe),
              run_on_path(KernelPath::kReference, light, inputs, probe), "lightweight float", 1e-4);
  EXPECT_EQ(run_on_path(KernelPath::kFused, light, inputs, probe).out.scalar_type(), torch::kFloat);
}

TEST(FusedConv, MaskedPositionsAreZeroAndReceiveNoGradient) {
  torch::manual_seed(17);
  auto mask = ragged_mask(2, 6);
  auto probe = torch::randn({2, 6, 4}, f64());
  Op op = [&](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], 1, mask); };
  OpRun run =
      run_on_path(KernelPath::kFused, op, {torch::randn({2, 6, 4}, f64()), torch::randn({2, 6, 2, 3}, f64())}, probe);
  auto masked = mask.logical_not();
  EXPECT_EQ(run.out.index({masked}).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(run.grads[0].index({masked}).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(run.grads[1].index({masked}).abs().sum().item<double>(), 0.0);
  EXPECT_GT(run.out.index({mask}).abs().sum().item<double>(), 0.0);
}

TEST(FusedConv, GradientsMatchFiniteDifferences) {
  torch::manual_seed(18);
  auto mask = torch::tensor({1, 1, 0, 1, 1, 1, 1, 0}, torch::kBool).view({2, 4});
  for (KernelPath path : {KernelPath::kFused, KernelPath::kReference}) {
    testing::ScopedKernelPath scope(path);
    const std::string where = ops::kernel_path_name(path);
    auto probe = torch::randn({2, 4, 4}, f64());
    Op light = [&](const std::vector<torch::Tensor>& in) { return ops::lightweight_conv(in[0], in[1], 2, mask); };
    EXPECT_LT(testing::max_finite_difference_error(light, {torch::randn({2, 4, 4}, f64()), torch::randn({2, 3}, f64())},
                                                   probe),
              1e-7)
        << where;
    Op dynamic = [&](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], 1, mask); };
    EXPECT_LT(testing::max_finite_difference_error(
                  dynamic, {torch::randn({2, 4, 4}, f64()), torch::randn({2, 4, 2, 2}, f64())}, probe),
              1e-7)
        << where;
    Op depthwise = [&](const std::vector<torch::Tensor>& in) {
      return ops::depthwise_conv(in[0], in[1], in[2], 5, mask);
    };
    EXPECT_LT(
        testing::max_finite_difference_error(
            depthwise, {torch::randn({2, 4, 4}, f64()), torch::randn({4, 6}, f64()), torch::randn({4}, f64())}, probe),
        1e-7)
        << where;
    Op relpos = [&](const std::vector<torch::Tensor>& in) {
      return ops::relative_position_scores(in[0], in[1], in[2], 1, 0.5);
    };
    EXPECT_LT(testing::max_finite_difference_error(
                  relpos, {torch::randn({1, 2, 4, 3}, f64()), torch::randn({3, 3}, f64()), torch::randn({2, 3}, f64())},
                  torch::randn({1, 2, 4, 4}, f64())),
              1e-7)
        << where;
  }
}

TEST(FusedConv, KernelPathParsingAndErrors) {
  EXPECT_EQ(ops::parse_kernel_path("fused"), KernelPath::kFused);
  EXPECT_EQ(ops::parse_kernel_path("reference"), KernelPath::kReference);
  try {
    ops::parse_kernel_path("cuda");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--kernels: expected fused or reference, got 'cuda'");
  }
  testing::ScopedKernelPath scope(KernelPath::kFused);
  try {
    ops::dynamic_conv(torch::randn({1, 4, 6}), torch::randn({1, 4, 4, 3}), 1);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "dynamic_conv: expected the 6 channels to split into 4 equal head blocks");
  }
  EXPECT_THROW(ops::lightweight_conv(torch::randn({1, 4, 6}), torch::randn({2, 3}), 3), UsageError);
  EXPECT_THROW(ops::lightweight_conv(torch::randn({1, 4, 6}), torch::randn({2, 3}), -1), UsageError);
  EXPECT_THROW(ops::lightweight_conv(torch::randn({1, 4, 6}), torch::randn({2, 3}, f64()), 1), UsageError);
  EXPECT_THROW(
      ops::lightweight_conv(torch::randn({1, 4, 6}), torch::randn({2, 3}), 1, torch::ones({1, 5}, torch::kBool)),
      UsageError);
  EXPECT_THROW(ops::relative_position_scores(torch::randn({1, 2, 4, 3}), {}, {}, 1, 1.0), UsageError);
  // A device the kernels do not know is refused by the single dispatch point, not silently run on CPU.
  auto meta = torch::TensorOptions().device(torch::kMeta);
  try {
    ops::dynamic_conv(torch::empty({1, 4, 6}, meta), torch::empty({1, 4, 2, 3}, meta), 1);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "dynamic_conv: expected a CPU or CUDA tensor, got one on meta");
  }
}

}  // namespace
}  // namespace cabert
