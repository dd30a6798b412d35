// Decoder attention against explicit loops (double), step by step against the full forward, causality bit
// for bit, padding of the source, and cache reordering for beams.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/models/decoder_attention.h"

namespace cabert::models {
namespace {

// out[n, i, h*d + e] = sum_j p_ij v[n, j, h, e], p = softmax over the allowed j of q_i . k_j / sqrt(d).
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, int64_t heads,
                              bool causal, const torch::Tensor& key_mask) {
  const int64_t N = q.size(0), T = q.size(1), S = k.size(1), H = q.size(2), d = H / heads;
  torch::Tensor out = torch::zeros({N, T, H}, torch::kDouble);
  auto Q = q.accessor<double, 3>(), K = k.accessor<double, 3>(), V = v.accessor<double, 3>();
  auto O = out.accessor<double, 3>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> scores(S, -INFINITY);
        double top = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          if ((causal && j > i) || (key_mask.defined() && !key_mask[n][j].item<bool>())) continue;
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += Q[n][i][h * d + e] * K[n][j][h * d + e];
          scores[j] = s / std::sqrt(static_cast<double>(d));
          top = std::max(top, scores[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < S; ++j) total += std::isinf(scores[j]) ? 0 : std::exp(scores[j] - top);
        for (int64_t j = 0; j < S; ++j) {
          if (std::isinf(scores[j])) continue;
          const double p = std::exp(scores[j] - top) / total;
          for (int64_t e = 0; e < d; ++e) O[n][i][h * d + e] += p * V[n][j][h * d + e];
        }
      }
    }
  }
  return out;
}

TEST(CausalSelfAttention, MatchesLoopsAndDecodesStepByStep) {
  torch::manual_seed(1);
  CausalSelfAttention attention(12, 3, 0.0);
  attention->to(torch::kDouble);
  attention->eval();
  torch::NoGradGuard no_grad;
  const int64_t N = 2, T = 5;
  torch::Tensor x = torch::randn({N, T, 12}, torch::kDouble);
  torch::Tensor full = attention->forward(x, {});
  torch::Tensor expected = naive_attention(attention->query(x), attention->key(x), attention->value(x), 3, true, {});
  EXPECT_TRUE(torch::allclose(full, expected, 1e-12, 1e-12));
  MixerState state;
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor step = attention->forward_step(x.narrow(1, t, 1), state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-12, 1e-12)) << t;
    EXPECT_EQ(state.keys.size(2), t + 1);
  }
}

TEST(CausalSelfAttention, LaterTokensDoNotChangeEarlierOutputs) {
  torch::manual_seed(2);
  CausalSelfAttention attention(16, 4, 0.0);
  attention->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 6, 16});
  for (int64_t t = 0; t + 1 < 6; ++t) {
    torch::Tensor changed = x.clone();
    changed.narrow(1, t + 1, 6 - t - 1).normal_();
    torch::Tensor a = attention->forward(x, {}), b = attention->forward(changed, {});
    EXPECT_TRUE(torch::equal(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1))) << t;
  }
}

TEST(CrossAttention, MatchesLoopsWithSourcePaddingAndCachesTheMemory) {
  torch::manual_seed(3);
  CrossAttention attention(8, 2, 0.0);
  attention->to(torch::kDouble);
  attention->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 4, 8}, torch::kDouble), memory = torch::randn({2, 6, 8}, torch::kDouble);
  torch::Tensor memory_mask = torch::ones({2, 6}, torch::kBool);
  memory_mask[1].narrow(0, 3, 3).fill_(false);  // the second source has 3 real tokens
  torch::Tensor full = attention->forward(x, memory, memory_mask);
  torch::Tensor expected =
      naive_attention(attention->query(x), attention->key(memory), attention->value(memory), 2, false, memory_mask);
  EXPECT_TRUE(torch::allclose(full, expected, 1e-12, 1e-12));
  // Padding carries no information: changing the padded memory rows changes nothing.
  torch::Tensor noisy = memory.clone();
  noisy[1].narrow(0, 3, 3).normal_();
  EXPECT_TRUE(torch::allclose(attention->forward(x, noisy, memory_mask), full, 1e-12, 1e-12));
  MixerState state;
  attention->cache_memory(memory, state);
  for (int64_t t = 0; t < 4; ++t) {
    torch::Tensor step = attention->forward_step(x.narrow(1, t, 1), memory_mask, state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-12, 1e-12)) << t;
  }
}

// Beam search keeps, drops and duplicates hypotheses: after reordering the caches, decoding continues as if
// the kept rows had been decoded on their own.
TEST(CausalSelfAttention, ReorderedCachesContinueTheKeptHypotheses) {
  torch::manual_seed(4);
  CausalSelfAttention attention(8, 2, 0.0);
  attention->to(torch::kDouble);
  attention->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({3, 4, 8}, torch::kDouble);
  torch::Tensor order = torch::tensor({2, 0, 2}, torch::kInt64);
  MixerState state;
  for (int64_t t = 0; t < 2; ++t) attention->forward_step(x.narrow(1, t, 1), state);
  state.reorder(order);
  torch::Tensor kept = x.index_select(0, order);
  torch::Tensor full = attention->forward(kept, {});
  for (int64_t t = 2; t < 4; ++t) {
    torch::Tensor step = attention->forward_step(kept.narrow(1, t, 1), state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-12, 1e-12)) << t;
  }
}

}  // namespace
}  // namespace cabert::models
