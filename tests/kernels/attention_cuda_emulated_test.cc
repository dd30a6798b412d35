// The composite attention's tiled CUDA kernels (kernels/cuda/attention_cuda_kernels.cuh, `--cuda-attention tiles`)
// run on the CPU through tests/kernels/cuda_emulator.h, their own source and host code (thread mapping, shared
// tiles, barriers, the rows' warp shuffles), against the tiled CPU kernel, whose agreement with the reference
// tests/kernels/attention_fused_test.cc establishes: outputs, log-sum-exp and every gradient in double to 1e-10,
// with the reference's dropout masks, across tiles of rows and of the head dimension.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "kernels/attention_kernels.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/emulated_launchers.h"

// After the emulator, which defines the CUDA keywords and built-ins that it uses.
#include "kernels/cuda/attention_cuda_kernels.cuh"

namespace cabert {
namespace {

namespace tiles = kernels::cuda::impl::tiles;
using testing::AttentionCase;

// Every test once per grid of tests/kernels/emulated_launchers.h (three blocks: each takes several tiles).
template <typename Launcher>
class TiledAttentionEmulated : public ::testing::Test {};
TYPED_TEST_SUITE(TiledAttentionEmulated, testing::EmulatedLaunchers, testing::EmulatedLauncherNames);

template <typename Launcher>
testing::KernelRun emulated_run(const kernels::AttentionInputs& in, const at::Tensor& dout) {
  EXPECT_TRUE(tiles::takes_tiles(in));
  testing::KernelRun run;
  run.outputs = tiles::forward<Launcher>(in);
  EXPECT_TRUE(run.outputs.tiled);
  run.grads = tiles::backward<Launcher>(dout, in, run.outputs);
  return run;
}

// One query tile and several (T past 32, a double tile, not a multiple of it), radius 0, inside a tile and past the
// length, each band alone and both, padding, dropout.
TYPED_TEST(TiledAttentionEmulated, MatchesTheCpuKernel) {
  const AttentionCase cases[] = {{1, 0, true, true, 0, 0.0},   {5, 2, true, false, 1, 0.0},
                                 {33, 3, false, true, 1, 0.0}, {70, 4, true, true, 1, 0.0},
                                 {70, 0, true, true, 0, 0.2},  {40, 50, true, true, 1, 0.3},
                                 {65, 9, false, false, 1, 0.1}};
  for (const AttentionCase& c : cases) {
    torch::manual_seed(101);
    const kernels::AttentionInputs in = testing::attention_inputs(c);
    const at::Tensor dout = testing::output_gradient(c);
    testing::expect_same_run(emulated_run<TypeParam>(in, dout), testing::tiled_run(in, dout), c.name());
  }
}

// Head sizes past one chunk of 32 (a partial chunk) and the largest the tiles take, contiguous inputs.
TYPED_TEST(TiledAttentionEmulated, HeadSizesAcrossChunks) {
  for (int64_t d : {40, 128}) {
    torch::manual_seed(102);
    kernels::AttentionInputs in = testing::banded_inputs(2, 2, 37, d, 3, 0.125, testing::f64());
    in.key_mask = torch::ones({2, 37}, torch::kBool);
    in.key_mask.index_put_({1, torch::indexing::Slice(30, torch::indexing::None)}, false);
    in.dropout = {0.25, 9, 3};
    const at::Tensor dout = torch::randn({2, 2, 37, d}, testing::f64());
    testing::expect_same_run(emulated_run<TypeParam>(in, dout), testing::tiled_run(in, dout), "d=" + std::to_string(d));
  }
}

// Float agrees with the double CPU kernel to float's rounding: one tile of 64 rows, and three (T = 150) with a head
// of 72 (two chunks of output columns), every band gradient's edge and inside, padding and dropout.
void expect_float_agrees(const kernels::AttentionInputs& in, const at::Tensor& dout, const std::string& name) {
  kernels::AttentionInputs in32 = in;
  for (at::Tensor* t : {&in32.q, &in32.k, &in32.v, &in32.query_band, &in32.key_band}) *t = t->to(torch::kFloat);
  const testing::KernelRun got = emulated_run<testing::GpuSizedGrid>(in32, dout.to(torch::kFloat));
  const testing::KernelRun want = testing::tiled_run(in, dout);
  auto expect_near = [&](const at::Tensor& got, const at::Tensor& want, const std::string& what) {
    EXPECT_EQ(got.scalar_type(), torch::kFloat) << name << ": " << what;
    const double error = (got.to(torch::kDouble) - want).abs().max().item<double>();
    EXPECT_LE(error, 2e-5 * (1 + want.abs().max().item<double>())) << name << ": " << what;
  };
  expect_near(got.outputs.out, want.outputs.out, "out");
  expect_near(got.outputs.logsumexp, want.outputs.logsumexp, "logsumexp");
  expect_near(got.grads.q, want.grads.q, "dq");
  expect_near(got.grads.k, want.grads.k, "dk");
  expect_near(got.grads.v, want.grads.v, "dv");
  expect_near(got.grads.query_band, want.grads.query_band, "d query band");
  expect_near(got.grads.key_band, want.grads.key_band, "d key band");
}

TEST(TiledAttentionEmulatedFloat, AgreesWithTheDoubleCpuKernel) {
  torch::manual_seed(103);
  const AttentionCase c{50, 4, true, true, 1, 0.2};
  expect_float_agrees(testing::attention_inputs(c), testing::output_gradient(c), c.name());
  kernels::AttentionInputs in = testing::banded_inputs(2, 2, 150, 72, 9, 0.125, testing::f64());
  in.key_mask = torch::ones({2, 150}, torch::kBool);
  in.key_mask.index_put_({1, torch::indexing::Slice(97, torch::indexing::None)}, false);
  in.dropout = {0.1, 11, 4};
  expect_float_agrees(in, torch::randn({2, 2, 150, 72}, testing::f64()), "T=150 d=72");
}

// What the tiles leave to the other routes: a batch row without a real key, head sizes past 128, weights
// instead of bands (kernels/attention_kernels.cc turns them into bands first), half precision.
TEST(TiledAttentionEmulatedFloat, TakesOnlyWhatItComputes) {
  torch::manual_seed(104);
  kernels::AttentionInputs in = testing::banded_inputs(2, 1, 8, 16, 2, 0.25, testing::f64());
  EXPECT_TRUE(tiles::takes_tiles(in));
  in.key_mask = torch::ones({2, 8}, torch::kBool);
  in.key_mask.index_put_({1, 3}, false);
  EXPECT_TRUE(tiles::takes_tiles(in)) << "a masked key";
  in.key_mask.index_put_({1}, false);
  EXPECT_FALSE(tiles::takes_tiles(in)) << "batch row 1 has no real key";
  EXPECT_FALSE(tiles::takes_tiles(testing::banded_inputs(1, 1, 8, 129, 2, 0.25, testing::f64())));
  EXPECT_TRUE(tiles::takes_tiles(testing::banded_inputs(1, 1, 8, 128, 2, 0.25, testing::f64())));
  kernels::AttentionInputs weights = testing::banded_inputs(1, 1, 8, 16, 2, 0.25, testing::f64());
  weights.query_band = weights.key_band = at::Tensor();
  weights.weights.query = torch::randn({5, 16}, testing::f64());
  EXPECT_FALSE(tiles::takes_tiles(weights));
  kernels::AttentionInputs half = testing::banded_inputs(1, 1, 8, 16, 2, 0.25);
  half.q = half.q.to(torch::kHalf);
  EXPECT_FALSE(tiles::takes_tiles(half));
}

}  // namespace
}  // namespace cabert
