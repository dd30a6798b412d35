// Composite attention on PyTorch's fused kernel (kernels/regions/attention_regions.h, CUDA's route for float),
// run on the CPU with PyTorch's CPU flash attention as the regions' kernel: output, log-sum-exp and every
// gradient against the tiled CPU kernel (itself checked against the reference) in double, over every
// combination of bands, radii 0, 1, 3 and beyond T, padding masks, T = 1, 2, and T past several strip blocks;
// against the reference's autograd directly; dropout through a plain-ATen region kernel written here, with the
// whole [B, N, T, T] mask rebuilt from the parts' draws; what the path does not take.
#include <gtest/gtest.h>

#include <functional>

#include "kernels/attention_kernels.h"
#include "kernels/dropout_kernels.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/regions/attention_regions.h"
#include "lib/core/errors.h"
#include "lib/ops/memory_meter.h"
#include "tests/kernels/attention_test_util.h"

namespace cabert {
namespace {

using testing::AttentionCase;
using testing::expect_close;
using testing::f64;

void expect_regions_match_tiles(const AttentionCase& c) {
  const kernels::AttentionInputs in = testing::attention_inputs(c);
  ASSERT_TRUE(kernels::regions::takes(in)) << c.name();
  const at::Tensor dout = testing::output_gradient(c);
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(in.q);
  testing::KernelRun regions;
  regions.outputs = kernels::regions::relative_attention_forward(in, flash);
  regions.grads = kernels::regions::relative_attention_backward(dout, in, regions.outputs, flash);
  testing::expect_same_run(regions, testing::tiled_run(in, dout), c.name());
}

TEST(RegionAttention, EveryBandRadiusAndMaskMatchesTheTiles) {
  torch::manual_seed(81);
  for (const int64_t radius : {0, 1, 3, 40}) {
    for (const bool query_band : {false, true}) {
      for (const bool key_band : {false, true}) {
        for (const int mask : {0, 1}) expect_regions_match_tiles({23, radius, query_band, key_band, mask, 0});
      }
    }
  }
}

TEST(RegionAttention, ShortAndLongSequencesMatchTheTiles) {
  torch::manual_seed(82);
  expect_regions_match_tiles({1, 2, true, true, 0, 0});     // no region, one strip entry
  expect_regions_match_tiles({2, 0, true, false, 1, 0});    // regions of one query
  expect_regions_match_tiles({4, 2, true, true, 0, 0});     // T = n + 2: regions of one query and one key
  expect_regions_match_tiles({101, 3, true, true, 1, 0});   // four strip blocks of 32, the last one ragged
  expect_regions_match_tiles({70, 20, false, true, 1, 0});  // blocks of 40 rows (R >= 2n)
}

// Independently of the CPU kernel: the reference formula with the T x T matrix, differentiated by autograd.
TEST(RegionAttention, MatchesTheReferenceAndItsAutograd) {
  torch::manual_seed(83);
  kernels::AttentionInputs in = testing::attention_inputs({45, 2, true, true, 1, 0});
  testing::require_grads(in);
  const at::Tensor reference = kernels::reference::relative_attention(in);
  const at::Tensor dout = torch::randn_like(reference);
  const kernels::AttentionGrads want = testing::autograd_grads(reference, in, dout);
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(in.q);
  const kernels::AttentionOutputs regions = kernels::regions::relative_attention_forward(in, flash);
  expect_close(regions.out, reference.detach(), "out");
  const kernels::AttentionGrads grads = kernels::regions::relative_attention_backward(dout, in, regions, flash);
  testing::expect_close_grads(grads, want, "reference");
  EXPECT_FALSE(regions.out.requires_grad()) << "the path records no graph of its own";
}

// ---- dropout: a plain-ATen region kernel with the contract of CUDA's (its own mask, the given out and lse
// honoured in the backward) ----

at::Tensor causal_scores(const at::Tensor& q, const at::Tensor& k) {
  const int64_t M = q.size(2);
  const at::Tensor future = torch::ones({M, M}, torch::kBool).triu(1);
  return torch::matmul(q, k.transpose(-1, -2)).masked_fill(future, -std::numeric_limits<double>::infinity());
}

at::Tensor region_keep(const at::Tensor& q, const kernels::DropoutDraw& draw) {
  const int64_t M = q.size(2);
  return kernels::dropout_keep({q.size(0), q.size(1), M, M}, draw).to(q.scalar_type()) / (1 - draw.p);
}

kernels::regions::RegionForward math_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const kernels::DropoutDraw& draw) {
  const at::Tensor s = causal_scores(q, k);
  const at::Tensor lse = torch::logsumexp(s, -1);
  const at::Tensor p = torch::exp(s - lse.unsqueeze(-1));
  return {torch::matmul(p * region_keep(q, draw), v), lse, at::Tensor()};
}

kernels::regions::RegionGrads math_backward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                            const kernels::DropoutDraw& draw, const at::Tensor&) {
  const at::Tensor p = torch::exp(causal_scores(q, k) - lse.unsqueeze(-1));
  const at::Tensor z = region_keep(q, draw);
  const at::Tensor dp = torch::matmul(dout, v.transpose(-1, -2)) * z;
  const at::Tensor ds = p * (dp - (dout * out).sum(-1, true));
  return {torch::matmul(ds, k), torch::matmul(ds.transpose(-1, -2), q), torch::matmul((p * z).transpose(-1, -2), dout)};
}

// The whole [B, N, T, T] keep mask (scaled) the path drew: each region's causal mask at its rows and keys,
// the strip's at |j - i| <= n.
at::Tensor whole_mask(const kernels::AttentionInputs& in) {
  const int64_t B = in.q.size(0), N = in.q.size(1), T = in.q.size(2), n = in.radius, M = T - n - 1;
  const double p = in.dropout.p;
  at::Tensor z = torch::zeros({B, N, T, T}, f64());
  auto zs = z.accessor<double, 4>();
  if (M > 0) {
    // One call for both regions: the left one's rows [0, B), the right one's [B, 2B), both axes reversed.
    const at::Tensor keep = kernels::dropout_keep({2 * B, N, M, M}, kernels::regions::part_draw(in.dropout, 1));
    auto ks = keep.accessor<bool, 4>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < N; ++h)
        for (int64_t a = 0; a < M; ++a)
          for (int64_t c = 0; c <= a; ++c) {
            zs[b][h][a + n + 1][c] = ks[b][h][a][c] / (1 - p);                      // query a + n + 1, key c
            zs[b][h][M - 1 - a][n + 1 + M - 1 - c] = ks[B + b][h][a][c] / (1 - p);  // both axes reversed
          }
  }
  const int64_t rows = kernels::regions::strip_block_rows(n), Tp = (T + rows - 1) / rows * rows;
  const at::Tensor strip = kernels::dropout_keep({B, N, Tp, 2 * n + 1}, kernels::regions::part_draw(in.dropout, 2));
  auto ss = strip.accessor<bool, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < N; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t r = 0; r <= 2 * n; ++r) {
          const int64_t j = i + r - n;
          if (j >= 0 && j < T) zs[b][h][i][j] = ss[b][h][i][r] / (1 - p);
        }
  return z;
}

TEST(RegionAttention, DropoutComposesThePartsMasks) {
  torch::manual_seed(84);
  const kernels::regions::RegionKernel math{math_forward, math_backward};
  for (const AttentionCase& c : {AttentionCase{29, 3, true, true, 1, 0.3}, AttentionCase{9, 0, true, false, 0, 0.3}}) {
    kernels::AttentionInputs in = testing::attention_inputs(c);
    EXPECT_FALSE(kernels::regions::takes(in)) << "the CPU's flash attention takes no dropout";
    testing::require_grads(in);
    kernels::AttentionInputs plain = in;
    plain.dropout.p = 0;
    at::Tensor probabilities;
    kernels::reference::relative_attention(plain, &probabilities);
    const at::Tensor want = torch::matmul(probabilities * whole_mask(in), in.v);
    const at::Tensor dout = torch::randn_like(want);
    const kernels::AttentionGrads want_grads = testing::autograd_grads(want, in, dout);
    const kernels::AttentionOutputs got = kernels::regions::relative_attention_forward(in, math);
    expect_close(got.out, want.detach(), c.name() + " out");
    const kernels::AttentionGrads grads = kernels::regions::relative_attention_backward(dout, in, got, math);
    testing::expect_close_grads(grads, want_grads, c.name());
    // The masks drop something, and the parts' draws differ from the whole-matrix scheme's.
    const at::Tensor reference_mask =
        kernels::dropout_keep({testing::kAttentionBatch, testing::kAttentionHeads, c.length, c.length}, in.dropout);
    EXPECT_FALSE(torch::equal(whole_mask(in).ne(0), reference_mask)) << c.name();
  }
}

// In float (CUDA's dtype for this path): a padded batch row whose left region has no real key for its last
// rows (their region's keys all at -1e30) still matches the tiled kernel to float tolerance, over several strip
// blocks.
TEST(RegionAttention, FloatMatchesTheTilesOverManyBlocks) {
  torch::manual_seed(86);
  const testing::AttentionCase c{300, 8, true, true, 1, 0};
  kernels::AttentionInputs in = testing::attention_inputs(c);
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.query_band, &in.key_band}) *t = t->to(torch::kFloat);
  const at::Tensor dout = testing::output_gradient(c).to(torch::kFloat);
  const testing::KernelRun tiles = testing::tiled_run(in, dout);
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(in.q);
  testing::KernelRun regions;
  regions.outputs = kernels::regions::relative_attention_forward(in, flash);
  regions.grads = kernels::regions::relative_attention_backward(dout, in, regions.outputs, flash);
  const std::pair<at::Tensor, at::Tensor> pairs[] = {{regions.outputs.out, tiles.outputs.out},
                                                     {regions.outputs.logsumexp, tiles.outputs.logsumexp},
                                                     {regions.grads.q, tiles.grads.q},
                                                     {regions.grads.k, tiles.grads.k},
                                                     {regions.grads.v, tiles.grads.v},
                                                     {regions.grads.query_band, tiles.grads.query_band},
                                                     {regions.grads.key_band, tiles.grads.key_band}};
  for (size_t i = 0; i < std::size(pairs); ++i) {
    EXPECT_TRUE(torch::allclose(pairs[i].first, pairs[i].second, 1e-4, 1e-4))
        << i << ": max diff " << (pairs[i].first - pairs[i].second).abs().max().item<double>();
  }
}

// Under autocast the regions' kernel takes bfloat16 operands (the rest stays in float32): output and every
// gradient within bfloat16's tolerance of the float kernel's, and not equal to them (the cast happened).
TEST(RegionAttention, Bfloat16KernelOperandsStayNearFloat) {
  torch::manual_seed(85);
  kernels::AttentionInputs in = testing::attention_inputs({45, 3, true, true, 1, 0});
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.query_band, &in.key_band}) *t = t->to(torch::kFloat);
  const at::Tensor dout = testing::output_gradient({45, 3, true, true, 1, 0}).to(torch::kFloat);
  const testing::KernelRun exact = testing::tiled_run(in, dout);
  in.fused_kernel_dtype = torch::kBFloat16;
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(in.q);
  const kernels::AttentionOutputs mixed = kernels::regions::relative_attention_forward(in, flash);
  const kernels::AttentionGrads grads = kernels::regions::relative_attention_backward(dout, in, mixed, flash);
  ASSERT_EQ(mixed.out.scalar_type(), torch::kFloat);
  const std::pair<at::Tensor, at::Tensor> pairs[] = {{mixed.out, exact.outputs.out},
                                                     {grads.q, exact.grads.q},
                                                     {grads.k, exact.grads.k},
                                                     {grads.v, exact.grads.v},
                                                     {grads.query_band, exact.grads.query_band},
                                                     {grads.key_band, exact.grads.key_band}};
  for (size_t i = 0; i < std::size(pairs); ++i) {
    const double scale = pairs[i].second.abs().max().item<double>();
    const double error = (pairs[i].first - pairs[i].second).abs().max().item<double>();
    EXPECT_LT(error, 0.03 * scale) << i;
    EXPECT_GT(error, 1e-5 * scale) << i << ": the same as float";
  }
}

// Nothing T x T: at T = 4096 with 4 heads the scores alone would be 256 MiB in float. The CPU's flash
// kernel, the strip's blocks and the regions' operands stay within a few tens of MiB.
TEST(RegionAttention, LongSequencesNeverHoldTheScoreMatrix) {
  const int64_t T = 4096;
  kernels::AttentionInputs in = testing::long_attention_inputs(T);
  const at::Tensor dout = torch::randn_like(in.q);
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(in.q);
  ops::install_cpu_memory_meter();
  ops::PeakMemoryScope meter;
  const kernels::AttentionOutputs regions = kernels::regions::relative_attention_forward(in, flash);
  const kernels::AttentionGrads grads = kernels::regions::relative_attention_backward(dout, in, regions, flash);
  EXPECT_LT(meter.peak_extra_bytes(), int64_t{48} << 20) << "peak " << meter.peak_extra_bytes();
  EXPECT_TRUE(grads.key_band.defined());
}

TEST(RegionAttention, TakesFloatAndDoubleWithRealKeysOnly) {
  kernels::AttentionInputs in = testing::attention_inputs({12, 2, true, true, 1, 0});
  EXPECT_TRUE(kernels::regions::takes(in));
  in.key_mask.index_put_({1}, false);  // a batch row with no real key attends to all alike: not taken
  EXPECT_FALSE(kernels::regions::takes(in));
  in.key_mask.index_put_({1}, true);
  in.q = in.q.to(torch::kFloat);
  EXPECT_TRUE(kernels::regions::takes(in));
  in.q = in.q.to(torch::kHalf);
  EXPECT_FALSE(kernels::regions::takes(in));
}

// The backends check what PyTorch's kernels do not (its CUDA backward reads grad_out, out and the log-sum-exp
// as given): a mismatch is an error naming the operand, not silently wrong gradients.
TEST(RegionAttention, KernelBackendsRefuseMismatchedOperands) {
  torch::manual_seed(9);
  const at::Tensor q = torch::randn({1, 2, 5, 8}, f64()), k = torch::randn({1, 2, 5, 8}, f64()),
                   v = torch::randn({1, 2, 5, 4}, f64());
  const kernels::regions::RegionKernel flash = kernels::regions::pytorch_region_kernel(q);
  const kernels::regions::RegionForward forward = flash.forward(q, k, v, {});
  const at::Tensor dout = torch::randn({1, 2, 5, 4}, f64());
  EXPECT_NO_THROW(flash.backward(dout, q, k, v, forward.out, forward.logsumexp, {}, forward.rng));
  auto expect_refused = [&](const std::string& message, const std::function<void()>& call) {
    try {
      call();
      ADD_FAILURE() << "accepted, expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  expect_refused("region kernel: grad_out is Float [1, 2, 5, 4] on cpu; expected Double [1, 2, 5, 4] on cpu", [&] {
    flash.backward(dout.to(torch::kFloat), q, k, v, forward.out, forward.logsumexp, {}, forward.rng);
  });
  expect_refused("region kernel: out is Double [1, 2, 5, 8] on cpu; expected Double [1, 2, 5, 4] on cpu", [&] {
    flash.backward(dout, q, k, v, torch::zeros({1, 2, 5, 8}, f64()), forward.logsumexp, {}, forward.rng);
  });
  expect_refused("region kernel: logsumexp is Double [1, 2, 6]; expected a floating [1, 2, 5]", [&] {
    flash.backward(dout, q, k, v, forward.out, torch::zeros({1, 2, 6}, f64()), {}, forward.rng);
  });
  expect_refused("region kernel: k is Double [1, 2, 5, 4] on cpu; expected Double [1, 2, 5, 8] on cpu",
                 [&] { flash.forward(q, k.narrow(3, 0, 4), v, {}); });
}

}  // namespace
}  // namespace cabert
