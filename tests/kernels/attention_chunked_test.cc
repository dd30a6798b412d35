// The chunked attention path (kernels/chunked/attention_chunked.h, CUDA's route) run on the CPU: output,
// log-sum-exp and every gradient against the tiled CPU kernel (whose agreement with the reference
// tests/kernels/attention_fused_test.cc establishes) in double, over every combination of bands, radii 0, 1,
// 3 and beyond T, padding masks (a batch row with no real key too), dropout with the same Philox draws, and
// blocks of 1, 5, T - 3 and all query rows (T not a multiple of the block); against the plain-ATen reference
// and its autograd directly; the block size arithmetic; the memory of long sequences.
#include <gtest/gtest.h>

#include "kernels/attention_kernels.h"
#include "kernels/chunked/attention_chunked.h"
#include "kernels/reference/attention_reference.h"
#include "lib/ops/memory_meter.h"
#include "tests/kernels/attention_test_util.h"

namespace cabert {
namespace {

using testing::AttentionCase;
using testing::expect_close;
constexpr int64_t kBatch = testing::kAttentionBatch, kHeads = testing::kAttentionHeads;

void expect_blocks_match_tiles(const AttentionCase& c) {
  const kernels::AttentionInputs in = testing::attention_inputs(c);
  const at::Tensor dout = testing::output_gradient(c);
  const testing::KernelRun tiles = testing::tiled_run(in, dout);
  const int64_t per_row = kBatch * kHeads * c.length;
  // T - 3 rows: the first block reaches past T - n for n >= 3, the second starts past n (its outer keys left).
  for (const int64_t rows : {int64_t{1}, int64_t{5}, std::max<int64_t>(1, c.length - 3), c.length}) {
    testing::KernelRun blocks;
    blocks.outputs = kernels::chunked::relative_attention_forward(in, rows * per_row);
    blocks.grads = kernels::chunked::relative_attention_backward(dout, in, blocks.outputs, rows * per_row);
    testing::expect_same_run(blocks, tiles, c.name() + " rows=" + std::to_string(rows));
  }
}

TEST(ChunkedAttention, EveryBandRadiusAndMaskMatchesTheTiles) {
  torch::manual_seed(71);
  for (const int64_t radius : {0, 1, 3, 40}) {
    for (const bool query_band : {false, true}) {
      for (const bool key_band : {false, true}) {
        expect_blocks_match_tiles({23, radius, query_band, key_band, 1, 0});
      }
    }
  }
}

TEST(ChunkedAttention, PaddingAndDropoutMatchTheTiles) {
  torch::manual_seed(72);
  for (const int mask : {0, 1, 2}) {
    for (const double dropout : {0.0, 0.3}) {
      expect_blocks_match_tiles({37, 3, true, true, mask, dropout});
    }
  }
  expect_blocks_match_tiles({1, 2, true, true, 0, 0.3});  // T = 1
  expect_blocks_match_tiles({2, 0, true, false, 1, 0.0});
}

// Independently of the CPU kernel: the reference formula with the T x T matrix, differentiated by autograd
// (padding and dropout on, blocks of 4 rows).
TEST(ChunkedAttention, MatchesTheReferenceAndItsAutograd) {
  torch::manual_seed(73);
  kernels::AttentionInputs in = testing::attention_inputs({19, 2, true, true, 1, 0.25});
  testing::require_grads(in);
  const at::Tensor reference = kernels::reference::relative_attention(in);
  const at::Tensor dout = torch::randn_like(reference);
  const kernels::AttentionGrads want = testing::autograd_grads(reference, in, dout);
  const int64_t rows = 4 * kBatch * kHeads * 19;
  const kernels::AttentionOutputs blocks = kernels::chunked::relative_attention_forward(in, rows);
  expect_close(blocks.out, reference.detach(), "out");
  const kernels::AttentionGrads grads = kernels::chunked::relative_attention_backward(dout, in, blocks, rows);
  testing::expect_close_grads(grads, want, "reference");
  EXPECT_FALSE(blocks.out.requires_grad()) << "the kernel records no graph of its own";
}

TEST(ChunkedAttention, BlockRowsFitTheBudget) {
  EXPECT_EQ(kernels::chunked::block_rows(32, 512, int64_t{1} << 25), 512);   // 8.4M elements: one block
  EXPECT_EQ(kernels::chunked::block_rows(384, 512, int64_t{1} << 25), 128);  // 170 rows fit: multiples of 64
  EXPECT_EQ(kernels::chunked::block_rows(32, 16384, int64_t{1} << 25), 64);
  EXPECT_EQ(kernels::chunked::block_rows(32, 65536, int64_t{1} << 25), 16);  // under 64: as many as fit
  EXPECT_EQ(kernels::chunked::block_rows(384, 65536, int64_t{1} << 25), 1);  // none fits: one row
  EXPECT_EQ(kernels::chunked::block_rows(0, 0, int64_t{1} << 25), 1);
}

// Past one block the extra memory grows with T, not T x T: at T = 4096 with 4 heads and blocks of 64 query
// rows (1 M elements, 4 MiB in float; the backward holds about seven) the scores alone would be 256 MiB.
TEST(ChunkedAttention, LongSequencesNeverHoldTheScoreMatrix) {
  const int64_t T = 4096, N = 4;
  kernels::AttentionInputs in = testing::long_attention_inputs(T);
  in.dropout = {0.1, 5, 0};
  const at::Tensor dout = torch::randn({1, N, T, 16});
  ASSERT_EQ(kernels::chunked::block_rows(N, T, int64_t{1} << 20), 64);
  ops::install_cpu_memory_meter();
  ops::PeakMemoryScope meter;
  const kernels::AttentionOutputs blocks = kernels::chunked::relative_attention_forward(in, int64_t{1} << 20);
  const kernels::AttentionGrads grads =
      kernels::chunked::relative_attention_backward(dout, in, blocks, int64_t{1} << 20);
  EXPECT_LT(meter.peak_extra_bytes(), int64_t{48} << 20) << "peak " << meter.peak_extra_bytes();
  EXPECT_TRUE(grads.key_band.defined());
}

}  // namespace
}  // namespace cabert
