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

namespace cabert {
namespace {

torch::TensorOptions f64() { return torch::TensorOptions().dtype(torch::kDouble); }

struct BlockCase {
  int64_t length, radius;
  bool query_band, key_band;
  int mask;  // 0 none, 1 ragged, 2 ragged with batch row 1 all padding
  double dropout;
  std::string name() const {
    return "T=" + std::to_string(length) + " n=" + std::to_string(radius) + (query_band ? " qband" : "") +
           (key_band ? " kband" : "") + (mask == 1 ? " masked" : mask == 2 ? " no-real-key" : "") +
           (dropout > 0 ? " dropout" : "");
  }
};

constexpr int64_t kBatch = 3, kHeads = 2, kHeadSize = 8;

kernels::AttentionInputs inputs_of(const BlockCase& c) {
  const int64_t T = c.length, width = 2 * c.radius + 1;
  kernels::AttentionInputs in;
  // Heads as the models pass them: [B, N, T, d] views of [B, T, N, d] storage.
  in.q = torch::randn({kBatch, T, kHeads, kHeadSize}, f64()).transpose(1, 2);
  in.k = torch::randn({kBatch, T, kHeads, kHeadSize}, f64()).transpose(1, 2);
  in.v = torch::randn({kBatch, T, kHeads, kHeadSize}, f64()).transpose(1, 2);
  if (c.query_band) in.query_band = torch::randn({kBatch, kHeads, T, width}, f64());
  if (c.key_band) in.key_band = torch::randn({kBatch, kHeads, T, width}, f64());
  if (c.mask > 0) {
    in.key_mask = torch::ones({kBatch, T}, torch::kBool);
    in.key_mask.index_put_({0, torch::indexing::Slice(std::max<int64_t>(1, T * 2 / 3), torch::indexing::None)}, false);
    if (T >= 4) in.key_mask.index_put_({2, 1}, false);
    if (c.mask == 2) in.key_mask.index_put_({1}, false);
  }
  in.radius = c.radius;
  in.scale = 0.37;
  in.dropout = {c.dropout, 0x5eed, 11};
  return in;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::allclose(got, want, 1e-10, 1e-10))
      << what << ": max diff " << (got - want).abs().max().item<double>();
}

void expect_blocks_match_tiles(const BlockCase& c) {
  const kernels::AttentionInputs in = inputs_of(c);
  const at::Tensor dout = torch::randn({kBatch, kHeads, c.length, kHeadSize}, f64());
  const kernels::AttentionOutputs tiles = kernels::relative_attention_forward(in);
  const kernels::AttentionGrads tile_grads = kernels::relative_attention_backward(dout, in, tiles);
  const int64_t per_row = kBatch * kHeads * c.length;
  // T - 3 rows: the first block reaches past T - n for n >= 3, the second starts past n (its outer keys left).
  for (const int64_t rows : {int64_t{1}, int64_t{5}, std::max<int64_t>(1, c.length - 3), c.length}) {
    const std::string where = c.name() + " rows=" + std::to_string(rows);
    const kernels::AttentionOutputs blocks = kernels::chunked::relative_attention_forward(in, rows * per_row);
    expect_close(blocks.out, tiles.out, where + " out");
    expect_close(blocks.logsumexp, tiles.logsumexp, where + " logsumexp");
    const kernels::AttentionGrads grads =
        kernels::chunked::relative_attention_backward(dout, in, blocks, rows * per_row);
    expect_close(grads.q, tile_grads.q, where + " dq");
    expect_close(grads.k, tile_grads.k, where + " dk");
    expect_close(grads.v, tile_grads.v, where + " dv");
    expect_close(grads.query_band, tile_grads.query_band, where + " d query band");
    expect_close(grads.key_band, tile_grads.key_band, where + " d key band");
    // Laid out as the CPU kernel's, so lib/ops adds the bands' gradients in place.
    EXPECT_TRUE(grads.q.transpose(1, 2).is_contiguous() && blocks.out.transpose(1, 2).is_contiguous()) << where;
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
  kernels::AttentionInputs in = inputs_of({19, 2, true, true, 1, 0.25});
  for (at::Tensor* t : {&in.q, &in.k, &in.v, &in.query_band, &in.key_band}) *t = t->detach().requires_grad_();
  const at::Tensor reference = kernels::reference::relative_attention(in);
  const at::Tensor dout = torch::randn_like(reference);
  const std::vector<at::Tensor> want =
      torch::autograd::grad({reference}, {in.q, in.k, in.v, in.query_band, in.key_band}, {dout});
  const int64_t rows = 4 * kBatch * kHeads * 19;
  const kernels::AttentionOutputs blocks = kernels::chunked::relative_attention_forward(in, rows);
  expect_close(blocks.out, reference.detach(), "out");
  const kernels::AttentionGrads grads = kernels::chunked::relative_attention_backward(dout, in, blocks, rows);
  expect_close(grads.q, want[0], "dq");
  expect_close(grads.k, want[1], "dk");
  expect_close(grads.v, want[2], "dv");
  expect_close(grads.query_band, want[3], "d query band");
  expect_close(grads.key_band, want[4], "d key band");
  EXPECT_FALSE(blocks.out.requires_grad()) << "the kernel records no graph of its own";
}

TEST(ChunkedAttention, BlockRowsFitTheBudget) {
  EXPECT_EQ(kernels::chunked::block_rows(32, 512, int64_t{1} << 25), 512);       // 8.4M elements: one block
  EXPECT_EQ(kernels::chunked::block_rows(384, 512, int64_t{1} << 25), 128);      // 170 rows fit: multiples of 64
  EXPECT_EQ(kernels::chunked::block_rows(32, 16384, int64_t{1} << 25), 64);
  EXPECT_EQ(kernels::chunked::block_rows(32, 65536, int64_t{1} << 25), 16);      // under 64: as many as fit
  EXPECT_EQ(kernels::chunked::block_rows(384, 65536, int64_t{1} << 25), 1);      // none fits: one row
  EXPECT_EQ(kernels::chunked::block_rows(0, 0, int64_t{1} << 25), 1);
}

// Past one block the extra memory grows with T, not T x T: at T = 4096 with 4 heads and blocks of 64 query
// rows (1 M elements, 4 MiB in float; the backward holds about seven) the scores alone would be 256 MiB.
TEST(ChunkedAttention, LongSequencesNeverHoldTheScoreMatrix) {
  const int64_t T = 4096, N = 4;
  kernels::AttentionInputs in;
  in.q = torch::randn({1, N, T, 16});
  in.k = torch::randn({1, N, T, 16});
  in.v = torch::randn({1, N, T, 16});
  in.query_band = torch::randn({1, N, T, 9});
  in.key_band = torch::randn({1, N, T, 9});
  in.radius = 4;
  in.scale = 0.25;
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
