// The per-element maths that the CUDA kernels run (kernels/conv_math.h), executed on CPU element by element
// exactly as the CUDA threads index it, against the reference ops and their autograd gradients. This is how
// the CUDA arithmetic is tested on a machine without a GPU (the launches themselves are untested here).
#include <gtest/gtest.h>

#include "kernels/conv_math.h"
#include "kernels/reference/conv_reference.h"

namespace cabert {
namespace {

namespace math = kernels::math;

torch::TensorOptions f64() { return torch::TensorOptions().dtype(torch::kDouble); }

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

// Dynamic conv, indexed like dynamic_*_kernel in kernels/cuda/conv_cuda.cu.
TEST(ConvMath, DynamicConvElementsMatchReference) {
  torch::manual_seed(21);
  const int64_t B = 2, T = 5, C = 4, H = 2, hs = C / H;
  for (int64_t K : {1, 4, 7}) {
    for (int64_t pad : {K / 2, K - 1}) {
      auto mask = torch::tensor({1, 1, 1, 0, 0, 1, 0, 1, 1, 1}, torch::kBool).view({B, T});
      auto x = torch::randn({B, T, C}, f64()).requires_grad_(true);
      auto kern = torch::randn({B, T, H, K}, f64()).requires_grad_(true);
      auto probe = torch::randn({B, T, C}, f64());
      auto expected = kernels::reference::dynamic_conv(x, kern, pad, mask);
      auto grads = torch::autograd::grad({(expected * probe).sum()}, {x, kern});
      auto xd = x.detach().contiguous(), kd = kern.detach().contiguous();
      auto out = torch::zeros({B, T, C}, f64()), gx = torch::zeros({B, T, C}, f64());
      auto gk = torch::zeros({B, T, H, K}, f64());
      const double *xp = xd.data_ptr<double>(), *kp = kd.data_ptr<double>(), *gp = probe.data_ptr<double>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t c = 0; c < C; ++c) {
            const double* taps = kp + (b * T * H + c / hs) * K;
            const bool* m = math::mask_row(mask_ptr(mask), b, T);
            out[b][t][c] = math::conv_output_element(xp + b * T * C, m, taps, H * K, t, c, T, C, K, pad);
            gx[b][t][c] = math::conv_input_grad_element(gp + b * T * C, m, taps, H * K, t, c, T, C, K, pad);
          }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t k = 0; k < K; ++k)
              gk[b][t][h][k] = math::conv_tap_grad_element(gp + b * T * C, xp + b * T * C,
                                                           math::mask_row(mask_ptr(mask), b, T), t, k, h * hs,
                                                           (h + 1) * hs, T, C, pad);
      EXPECT_TRUE(torch::allclose(out, expected.detach())) << "K=" << K << " pad=" << pad;
      EXPECT_TRUE(torch::allclose(gx, grads[0])) << "K=" << K << " pad=" << pad;
      EXPECT_TRUE(torch::allclose(gk, grads[1])) << "K=" << K << " pad=" << pad;
    }
  }
}

// Depthwise conv (position-independent weights), indexed like grouped_*_kernel.
TEST(ConvMath, DepthwiseElementsMatchReference) {
  torch::manual_seed(22);
  const int64_t B = 2, T = 4, C = 3;
  for (int64_t K : {2, 3, 9}) {
    const int64_t pad = K / 2;
    auto mask = torch::tensor({1, 1, 1, 0, 1, 0, 1, 1}, torch::kBool).view({B, T});
    auto x = torch::randn({B, T, C}, f64()).requires_grad_(true);
    auto w = torch::randn({C, K}, f64()).requires_grad_(true);
    auto probe = torch::randn({B, T, C}, f64());
    auto expected = kernels::reference::depthwise_conv(x, w, {}, pad, mask);
    auto grads = torch::autograd::grad({(expected * probe).sum()}, {x, w});
    auto xd = x.detach().contiguous(), wd = w.detach().contiguous();
    auto out = torch::zeros({B, T, C}, f64()), gx = torch::zeros({B, T, C}, f64()), gw = torch::zeros({C, K}, f64());
    const double *xp = xd.data_ptr<double>(), *wp = wd.data_ptr<double>(), *gp = probe.data_ptr<double>();
    for (int64_t b = 0; b < B; ++b) {
      const bool* m = math::mask_row(mask.data_ptr<bool>(), b, T);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
          out[b][t][c] = math::conv_output_element(xp + b * T * C, m, wp + c * K, 0, t, c, T, C, K, pad);
          gx[b][t][c] = math::conv_input_grad_element(gp + b * T * C, m, wp + c * K, 0, t, c, T, C, K, pad);
        }
      for (int64_t c = 0; c < C; ++c)
        for (int64_t k = 0; k < K; ++k)
          gw[c][k] += math::conv_weight_grad_element(gp + b * T * C, xp + b * T * C, m, c, k, T, C, pad);
    }
    EXPECT_TRUE(torch::allclose(out, expected.detach())) << K;
    EXPECT_TRUE(torch::allclose(gx, grads[0])) << K;
    EXPECT_TRUE(torch::allclose(gw, grads[1])) << K;
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
      auto via_band = band_leaf.gather(3, index.expand({B, N, T, T})) + beta.index_select(1, index.reshape(-1)).view({1, N, T, T});
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
          EXPECT_NEAR(out[r], math::relpos_band_grad_element(g, i, r, T, n), 1e-12) << "T=" << T << " n=" << n
                                                                                    << " i=" << i << " r=" << r;
        }
      }
    }
}

// The CUDA weight gradient splits T into chunks (conv_weight_grad_range) and sums them: the same as the whole row.
TEST(ConvMath, WeightGradientChunksSumToTheWholeRow) {
  torch::manual_seed(25);
  const int64_t C = 3;
  for (int64_t T : {1, 7, 33, 100})
    for (int64_t K : {1, 4, 17, 40})
      for (int64_t pad : {int64_t{0}, K / 2, K - 1})
        for (int64_t chunk_length : {int64_t{1}, int64_t{5}, int64_t{32}, T}) {
          const torch::Tensor grad = torch::randn({T, C}, f64()), x = torch::randn({T, C}, f64());
          torch::Tensor mask = torch::rand({T}) > 0.3;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t k = 0; k < K; ++k) {
              double chunked = 0;
              for (int64_t t0 = 0; t0 < T; t0 += chunk_length) {
                chunked += math::conv_weight_grad_range(grad.data_ptr<double>(), x.data_ptr<double>(),
                                                        mask.data_ptr<bool>(), c, k, t0,
                                                        std::min(T, t0 + chunk_length), T, C, pad);
              }
              EXPECT_NEAR(chunked,
                          math::conv_weight_grad_element(grad.data_ptr<double>(), x.data_ptr<double>(),
                                                         mask.data_ptr<bool>(), c, k, T, C, pad),
                          1e-12)
                  << "T=" << T << " K=" << K << " pad=" << pad << " chunk " << chunk_length;
            }
        }
}

// The CUDA dynamic kernel gradient gives lane l of a warp the channels h d + l, h d + l + 32, ...: the 32 strided
// sums add up to the head's sum, a plain dot product of the grad row t and the x row t + k - pad (zero off the
// row or at a masked position), for heads narrower and wider than a warp.
TEST(ConvMath, LaneStridedTapGradientsSumToTheHeadDotProduct) {
  torch::manual_seed(26);
  for (int64_t head_size : {1, 8, 32, 70}) {
    const int64_t T = 9, H = 2, C = H * head_size, K = 4, pad = 2;
    const torch::Tensor grad = torch::randn({T, C}, f64()), x = torch::randn({T, C}, f64());
    const torch::Tensor mask = torch::ones({T}, torch::kBool).index_put_({3}, false);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t h = 0; h < H; ++h) {
          double lanes = 0;
          for (int64_t lane = 0; lane < 32; ++lane) {
            lanes += math::conv_tap_grad_element(grad.data_ptr<double>(), x.data_ptr<double>(), mask.data_ptr<bool>(),
                                                 t, k, h * head_size + lane, (h + 1) * head_size, T, C, pad, 32);
          }
          const int64_t s = t + k - pad;
          double expected = 0;
          if (s >= 0 && s < T && t != 3 && s != 3) {
            const auto head = torch::indexing::Slice(h * head_size, (h + 1) * head_size);
            expected = (grad.index({t, head}) * x.index({s, head})).sum().item<double>();
          }
          EXPECT_NEAR(lanes, expected, 1e-12) << "d=" << head_size << " t=" << t << " k=" << k << " h=" << h;
        }
  }
}

}  // namespace
}  // namespace cabert
