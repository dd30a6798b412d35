// The maths that the CUDA kernels run (kernels/conv_math.h), executed on the CPU exactly as the CUDA blocks and
// threads index it, against the reference ops and their autograd gradients: the convolutions' tiles swept as the
// blocks sweep them, and the relative-position elements. This is how the CUDA arithmetic is tested on a machine
// without a GPU (the kernels themselves, thread mapping and barriers, are run on the CPU by
// cuda_kernels_emulated_test.cc and on a device by tests/gpu).
#include "kernels/conv_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/reference/conv_reference.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert {
namespace {

namespace math = kernels::math;
using testing::f64;

const bool* mask_ptr(const torch::Tensor& mask) { return mask.defined() ? mask.data_ptr<bool>() : nullptr; }

TEST(ConvMath, TapRangesCoverExactlyTheInRangeSources) {
  for (int64_t T : {1, 3, 8})
    for (int64_t K : {1, 2, 5, 11})
      for (int64_t pad = 0; pad < K; ++pad)
        for (int64_t t = 0; t < T; ++t) {
          const auto out = math::taps_of_output(t, T, K, pad);
          const auto src = math::taps_of_source(t, T, K, pad);
          for (int64_t k = 0; k < K; ++k) {
            const bool source_inside = t + k - pad >= 0 && t + k - pad < T;
            EXPECT_EQ(k >= out.begin && k < out.end, source_inside) << T << " " << K << " " << pad << " " << t;
            const bool output_inside = t - k + pad >= 0 && t - k + pad < T;
            EXPECT_EQ(k >= src.begin && k < src.end, output_inside) << T << " " << K << " " << pad << " " << t;
          }
        }
}

// ---- The convolutions' tiles, swept as kernels/cuda/conv_cuda_kernels.cuh's blocks sweep them ----

constexpr int kStride = math::kTileChannels + 1;  // the CUDA kernels pad their tile rows so

// The taps of channel c of batch element b, as conv_cuda_kernels.cuh's TapLayout gives them: weights [G, K] (batch_stride
// 0, group_size C / G, tap_row_stride 0) or kernels [B, T, H, K] (T H K, C / H, H K).
struct Taps {
  const double* weights;
  int64_t batch_stride, group_size, tap_row_stride, kernel_size;
  const double* of(int64_t b, int64_t c) const { return weights + b * batch_stride + (c / group_size) * kernel_size; }
};

Taps grouped_taps(const torch::Tensor& weight, int64_t channels) {
  return {weight.data_ptr<double>(), 0, channels / weight.size(0), 0, weight.size(1)};
}

Taps dynamic_taps(const torch::Tensor& kernels, int64_t channels) {
  const int64_t T = kernels.size(1), H = kernels.size(2), K = kernels.size(3);
  return {kernels.data_ptr<double>(), T * H * K, channels / H, H * K, K};
}

// A shared-memory tile as fill_tile fills it: rows first_row .. of one row [T, C] (length: where it ends).
std::vector<double> tile_of(const double* rows, const bool* mask, int64_t first_row, int tile_rows, int64_t c0,
                            int64_t c_end, int64_t length, int64_t channels) {
  std::vector<double> tile(tile_rows * kStride, std::nan(""));  // the padding column is never read
  for (int i = 0; i < tile_rows; ++i)
    for (int j = 0; j < math::kTileChannels; ++j)
      tile[i * kStride + j] = math::tile_entry(rows, mask, first_row + i, c0 + j, c_end, length, channels);
  return tile;
}

const bool* row_mask(const torch::Tensor& mask, int64_t b, int64_t T) { return math::mask_row(mask_ptr(mask), b, T); }

// conv_tiles_kernel: the forward of x (input_grad false; bias added at real positions) or the input gradient of
// grad (true), [B, T, C] (NaN where no block wrote).
torch::Tensor sweep_tiles(const torch::Tensor& rows, const Taps& taps, const torch::Tensor& bias,
                          const torch::Tensor& mask, int64_t pad, bool input_grad) {
  const int64_t B = rows.size(0), T = rows.size(1), C = rows.size(2), K = taps.kernel_size;
  torch::Tensor out = torch::full({B, T, C}, std::nan(""), f64());
  auto o = out.accessor<double, 3>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t0 = 0; t0 < T; t0 += math::kTileRows)
      for (int64_t c0 = 0; c0 < C; c0 += math::kTileChannels) {
        double sums[math::kTileRows][math::kTileChannels] = {};
        for (int64_t k0 = 0; k0 < K; k0 += math::kTileTaps) {
          const int64_t first_row = input_grad ? math::input_grad_tile_first_row(t0, k0, pad) : t0 + k0 - pad;
          const auto tile = tile_of(rows.data_ptr<double>() + b * T * C, row_mask(mask, b, T), first_row,
                                    math::kWideTileRows, c0, C, T, C);
          for (int i = 0; i < math::kTileRows && t0 + i < T; ++i)
            for (int j = 0; j < math::kTileChannels && c0 + j < C; ++j) {
              const double* channel_taps = taps.of(b, c0 + j);
              sums[i][j] += input_grad ? math::tile_input_grad_sum(tile.data(), kStride, i, j, channel_taps,
                                                                   taps.tap_row_stride, t0 + i, k0, K, T, pad)
                                       : math::tile_output_sum(tile.data(), kStride, i, j, channel_taps,
                                                               taps.tap_row_stride, t0 + i, k0, K);
            }
        }
        for (int i = 0; i < math::kTileRows && t0 + i < T; ++i)
          for (int j = 0; j < math::kTileChannels && c0 + j < C; ++j) {
            const double b_c = bias.defined() ? bias[c0 + j].item<double>() : 0.0;
            o[b][t0 + i][c0 + j] = math::is_real(row_mask(mask, b, T), t0 + i) ? sums[i][j] + b_c : 0.0;
          }
      }
  return out;
}

// The two tiles of the weight and kernel gradients: grad rows t0 .. (ending at grad_end) and x rows
// t0 + k0 - pad .., over channels c0 .. c_end - 1 of batch element b.
struct GradSourceTiles {
  std::vector<double> grad, source;
};

GradSourceTiles grad_source_tiles(const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& mask,
                                  int64_t b, int64_t t0, int64_t grad_end, int64_t k0, int64_t pad, int64_t c0,
                                  int64_t c_end) {
  const int64_t T = grad.size(1), C = grad.size(2);
  const bool* m = row_mask(mask, b, T);
  return {tile_of(grad.data_ptr<double>() + b * T * C, m, t0, math::kTileRows, c0, c_end, grad_end, C),
          tile_of(x.data_ptr<double>() + b * T * C, m, t0 + k0 - pad, math::kWideTileRows, c0, c_end, T, C)};
}

// grouped_weight_grad_kernel with chunks of chunk_length positions (a multiple of kTileRows), the partial sums
// summed over batch elements and chunks: d loss / d weight per channel, [C, K].
torch::Tensor sweep_weight_grad(const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& mask, int64_t K,
                                int64_t pad, int64_t chunk_length) {
  const int64_t B = grad.size(0), T = grad.size(1), C = grad.size(2);
  torch::Tensor grad_weight = torch::zeros({C, K}, f64());
  auto o = grad_weight.accessor<double, 2>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t chunk_begin = 0; chunk_begin < T; chunk_begin += chunk_length)
      for (int64_t c0 = 0; c0 < C; c0 += math::kTileChannels)
        for (int64_t k0 = 0; k0 < K; k0 += math::kTileTaps) {
          const int64_t t_end = std::min(T, chunk_begin + chunk_length);
          double sums[math::kTileTaps][math::kTileChannels] = {};
          for (int64_t t0 = chunk_begin; t0 < t_end; t0 += math::kTileRows) {
            const GradSourceTiles tiles = grad_source_tiles(grad, x, mask, b, t0, t_end, k0, pad, c0, C);
            for (int k = 0; k < math::kTileTaps; ++k)
              for (int j = 0; j < math::kTileChannels; ++j)
                sums[k][j] += math::weight_grad_tile_sum(tiles.grad.data(), tiles.source.data(), kStride, k, j);
          }
          for (int k = 0; k < math::kTileTaps && k0 + k < K; ++k)
            for (int j = 0; j < math::kTileChannels && c0 + j < C; ++j) o[c0 + j][k0 + k] += sums[k][j];
        }
  return grad_weight;
}

// dynamic_kernel_grad_kernel: d loss / d kernels [B, T, H, K] (NaN where no block wrote).
torch::Tensor sweep_kernel_grad(const torch::Tensor& grad, const torch::Tensor& x, const torch::Tensor& mask, int64_t H,
                                int64_t K, int64_t pad) {
  const int64_t B = grad.size(0), T = grad.size(1), C = grad.size(2), head_size = C / H;
  torch::Tensor grad_kernels = torch::full({B, T, H, K}, std::nan(""), f64());
  auto o = grad_kernels.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t0 = 0; t0 < T; t0 += math::kTileRows)
        for (int64_t k0 = 0; k0 < K; k0 += math::kTileTaps) {
          double sums[math::kTileRows][math::kTileTaps] = {};
          const int64_t c_end = (h + 1) * head_size;
          for (int64_t c0 = h * head_size; c0 < c_end; c0 += math::kTileChannels) {
            const GradSourceTiles tiles = grad_source_tiles(grad, x, mask, b, t0, T, k0, pad, c0, c_end);
            for (int i = 0; i < math::kTileRows; ++i)
              for (int k = 0; k < math::kTileTaps; ++k)
                sums[i][k] += math::kernel_grad_tile_dot(tiles.grad.data(), tiles.source.data(), i, k, kStride);
          }
          for (int i = 0; i < math::kTileRows && t0 + i < T; ++i)
            for (int k = 0; k < math::kTileTaps && k0 + k < K; ++k) o[b][t0 + i][h][k0 + k] = sums[i][k];
        }
  return grad_kernels;
}

// Dynamic conv: the forward, input gradient and kernel gradient tiles against the reference and its autograd, on
// one tile and on several (T and C past a tile, K past a chunk of taps, heads not a multiple of a chunk).
TEST(ConvMath, DynamicConvTilesMatchReference) {
  torch::manual_seed(21);
  struct Shape {
    int64_t B, T, C, H;
  };
  for (const Shape& shape : {Shape{2, 5, 4, 2}, Shape{2, 45, 140, 2}})
    for (int64_t K : {1, 4, 7, 33})
      for (int64_t pad : {K / 2, K - 1}) {
        const int64_t B = shape.B, T = shape.T, C = shape.C, H = shape.H;
        auto mask = torch::rand({B, T}) > 0.25;
        auto x = torch::randn({B, T, C}, f64()).requires_grad_(true);
        auto kern = torch::randn({B, T, H, K}, f64()).requires_grad_(true);
        auto probe = torch::randn({B, T, C}, f64());
        auto expected = kernels::reference::dynamic_conv(x, kern, pad, mask);
        auto grads = torch::autograd::grad({(expected * probe).sum()}, {x, kern});
        auto xd = x.detach().contiguous(), kd = kern.detach().contiguous();
        // The kernels between two NaN guards of one batch element each: the input gradient reading the taps of an
        // output off the row (t < 0 or t >= T, whose grad entries are zeros) would reach a guard and give NaN.
        const int64_t batch_elements = T * H * K;
        auto guarded = torch::full({(B + 2) * batch_elements}, std::nan(""), f64());
        guarded.narrow(0, batch_elements, B * batch_elements).copy_(kd.flatten());
        Taps taps = dynamic_taps(kd, C);
        taps.weights = guarded.data_ptr<double>() + batch_elements;
        const std::string where = "T=" + std::to_string(T) + " C=" + std::to_string(C) + " K=" + std::to_string(K) +
                                  " pad=" + std::to_string(pad);
        EXPECT_TRUE(torch::allclose(sweep_tiles(xd, taps, {}, mask, pad, false), expected.detach())) << where;
        EXPECT_TRUE(torch::allclose(sweep_tiles(probe, taps, {}, mask, pad, true), grads[0])) << where;
        EXPECT_TRUE(torch::allclose(sweep_kernel_grad(probe, xd, mask, H, K, pad), grads[1])) << where;
      }
}

// Depthwise (weight [C, K], bias) and lightweight (weight [G, K] shared by C / G channels) convs: the forward,
// input gradient and weight gradient tiles (in chunks of one and of several tiles of rows) against the reference.
TEST(ConvMath, GroupedConvTilesMatchReference) {
  torch::manual_seed(22);
  struct Shape {
    int64_t B, T, C;
  };
  for (const Shape& shape : {Shape{2, 4, 3}, Shape{2, 45, 40}})
    for (int64_t K : {2, 3, 9, 33})
      for (int64_t groups : {shape.C, int64_t{1}}) {
        const int64_t B = shape.B, T = shape.T, C = shape.C, pad = K / 2;
        auto mask = torch::rand({B, T}) > 0.25;
        auto x = torch::randn({B, T, C}, f64()).requires_grad_(true);
        auto w = torch::randn({groups, K}, f64()).requires_grad_(true);
        auto bias = torch::randn({C}, f64()).requires_grad_(true);
        auto probe = torch::randn({B, T, C}, f64());
        auto expected = groups == C ? kernels::reference::depthwise_conv(x, w, bias, pad, mask)
                                    : kernels::reference::lightweight_conv(x, w, pad, mask);
        auto grads = torch::autograd::grad({(expected * probe).sum()}, {x, w}, {}, false, false, true);
        auto xd = x.detach().contiguous(), wd = w.detach().contiguous();
        const Taps taps = grouped_taps(wd, C);
        const torch::Tensor used_bias = groups == C ? bias.detach() : torch::Tensor();
        const std::string where = "T=" + std::to_string(T) + " K=" + std::to_string(K) + " G=" + std::to_string(groups);
        EXPECT_TRUE(torch::allclose(sweep_tiles(xd, taps, used_bias, mask, pad, false), expected.detach())) << where;
        EXPECT_TRUE(torch::allclose(sweep_tiles(probe, taps, {}, mask, pad, true), grads[0])) << where;
        for (int64_t chunk_length : {int64_t{32}, int64_t{64}}) {
          const torch::Tensor per_channel = sweep_weight_grad(probe, xd, mask, K, pad, chunk_length);
          const torch::Tensor per_group = per_channel.view({groups, C / groups, K}).sum(1);
          EXPECT_TRUE(torch::allclose(per_group, grads[1])) << where << " chunk " << chunk_length;
        }
      }
}

TEST(ConvMath, RelativePositionElementsMatchReference) {
  torch::manual_seed(23);
  const int64_t B = 1, N = 2, d = 3;
  for (int64_t T : {1, 4, 7})
    for (int64_t n : {0, 1, 3, 9}) {
      const int64_t R = 2 * n + 1;
      auto q = torch::randn({B, N, T, d}, f64()).requires_grad_(true);
      auto w = torch::randn({R, d}, f64());
      auto beta = torch::randn({N, R}, f64());
      auto probe = torch::randn({B, N, T, T}, f64());
      auto expected = kernels::reference::relative_position_scores(q, w, beta, n, 1.0);
      auto band = torch::matmul(q.detach(), w.t()).contiguous();  // [B, N, T, R]
      // The band gradient the reduction must produce: d loss / d band = probe summed per relative index.
      auto band_leaf = band.clone().requires_grad_(true);
      auto index = kernels::reference::relative_index_matrix(T, n, torch::kCPU);
      auto via_band =
          band_leaf.gather(3, index.expand({B, N, T, T})) + beta.index_select(1, index.reshape(-1)).view({1, N, T, T});
      auto band_grad_expected = torch::autograd::grad({(via_band * probe).sum()}, {band_leaf})[0];
      auto out = torch::zeros({B, N, T, T}, f64());
      auto band_grad = torch::zeros({B, N, T, R}, f64());
      for (int64_t h = 0; h < N; ++h)
        for (int64_t i = 0; i < T; ++i) {
          for (int64_t j = 0; j < T; ++j)
            out[0][h][i][j] = math::relpos_score_element(band.data_ptr<double>() + h * T * R,
                                                         beta.data_ptr<double>() + h * R, i, j, n);
          for (int64_t r = 0; r < R; ++r)
            band_grad[0][h][i][r] =
                math::relpos_band_grad_element(probe.data_ptr<double>() + (h * T + i) * T, i, r, T, n);
        }
      EXPECT_TRUE(torch::allclose(out, expected.detach())) << "T=" << T << " n=" << n;
      EXPECT_TRUE(torch::allclose(band_grad, band_grad_expected)) << "T=" << T << " n=" << n;
    }
}

// The CUDA relpos reduction's row split (a warp per row: inner offsets copied, the two clipped tails summed over
// [0, relpos_low_tail_end) and [relpos_high_tail_begin, T)), replayed on the CPU with 32 lanes and a tree sum,
// gives the per-element band gradient.
TEST(ConvMath, RelativePositionRowSplitGivesTheBandGradient) {
  torch::manual_seed(24);
  for (int64_t T : {1, 2, 5, 40, 100})
    for (int64_t n : {0, 1, 3, 9, 60}) {
      const int64_t width = 2 * n + 1;
      const torch::Tensor row_grad = torch::randn({T, T}, f64());
      const double* g_all = row_grad.data_ptr<double>();
      for (int64_t i = 0; i < T; ++i) {
        const double* g = g_all + i * T;
        std::vector<double> out(width, -1.0);
        for (int64_t r = 1; r < width - 1; ++r) {
          const int64_t j = i + r - n;
          out[r] = j >= 0 && j < T ? g[j] : 0.0;
        }
        double low_lanes[32] = {}, high_lanes[32] = {};
        for (int lane = 0; lane < 32; ++lane) {
          for (int64_t j = lane; j < math::relpos_low_tail_end(i, n, T); j += 32) low_lanes[lane] += g[j];
          if (n > 0) {
            for (int64_t j = math::relpos_high_tail_begin(i, n, T) + lane; j < T; j += 32) high_lanes[lane] += g[j];
          }
        }
        for (int offset = 16; offset > 0; offset /= 2) {  // __shfl_xor_sync's butterfly, lane 0's view
          for (int lane = 0; lane < offset; ++lane) {
            low_lanes[lane] += low_lanes[lane + offset];
            high_lanes[lane] += high_lanes[lane + offset];
          }
        }
        out[0] = low_lanes[0];
        if (n > 0) out[width - 1] = high_lanes[0];
        for (int64_t r = 0; r < width; ++r) {
          EXPECT_NEAR(out[r], math::relpos_band_grad_element(g, i, r, T, n), 1e-12)
              << "T=" << T << " n=" << n << " i=" << i << " r=" << r;
        }
      }
    }
}

// The CUDA weight gradient splits T into chunks of whole tiles of rows and sums them: every chunk length gives
// the whole row's sum over t of grad[t, c] x[t + k - pad, c] (zero at a padded position or a source off the row).
TEST(ConvMath, WeightGradientChunksSumToTheWholeRow) {
  torch::manual_seed(25);
  const int64_t C = 3;
  for (int64_t T : {1, 7, 33, 100})
    for (int64_t K : {1, 4, 17, 40})
      for (int64_t pad : {int64_t{0}, K / 2, K - 1}) {
        const torch::Tensor grad = torch::randn({1, T, C}, f64()), x = torch::randn({1, T, C}, f64());
        const torch::Tensor mask = torch::rand({1, T}) > 0.3;
        torch::Tensor expected = torch::zeros({C, K}, f64());
        for (int64_t k = 0; k < K; ++k)
          for (int64_t t = 0; t < T; ++t) {
            const int64_t s = t + k - pad;
            if (s < 0 || s >= T || !mask[0][t].item<bool>() || !mask[0][s].item<bool>()) continue;
            expected.index_put_({torch::indexing::Slice(), k},
                                expected.index({torch::indexing::Slice(), k}) + grad[0][t] * x[0][s]);
          }
        for (int64_t chunk_length : {int64_t{32}, int64_t{64}, (T + 31) / 32 * 32}) {
          EXPECT_TRUE(torch::allclose(sweep_weight_grad(grad, x, mask, K, pad, chunk_length), expected))
              << "T=" << T << " K=" << K << " pad=" << pad << " chunk " << chunk_length;
        }
      }
}

// The dynamic kernel gradient's tiles: every (t, k) of every head gets the head's dot product of the grad row t
// and the x row t + k - pad, zero where either is padding or the source is off the row (computed here with ATen),
// for heads narrower than, as wide as and not a multiple of a chunk, more outputs and taps than one tile, centred
// and causal padding.
TEST(ConvMath, KernelGradientTilesGiveEveryTapsHeadDotProduct) {
  torch::manual_seed(26);
  for (int64_t head_size : {1, 8, 32, 40, 70})
    for (int64_t K : {4, 33})
      for (int64_t T : {9, 45})
        for (int64_t pad : {K / 2, K - 1}) {
          const int64_t H = 2, C = H * head_size;
          const torch::Tensor grad = torch::randn({1, T, C}, f64()), x = torch::randn({1, T, C}, f64());
          const torch::Tensor mask = torch::ones({1, T}, torch::kBool).index_put_({0, 3}, false);
          const torch::Tensor tiled = sweep_kernel_grad(grad, x, mask, H, K, pad);
          for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t k = 0; k < K; ++k) {
                const int64_t s = t + k - pad;
                double expected = 0;
                if (s >= 0 && s < T && t != 3 && s != 3) {
                  const auto head = torch::indexing::Slice(h * head_size, (h + 1) * head_size);
                  expected = (grad.index({0, t, head}) * x.index({0, s, head})).sum().item<double>();
                }
                EXPECT_NEAR(tiled[0][t][h][k].item<double>(), expected, 1e-12)
                    << "d=" << head_size << " K=" << K << " T=" << T << " pad=" << pad << " t=" << t << " k=" << k
                    << " h=" << h;
              }
        }
}

}  // namespace
}  // namespace cabert
