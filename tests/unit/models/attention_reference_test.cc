// Every attention/convolution mixer against an independent naive implementation of its formula (explicit
// loops over batch, heads, i, j, channels in double), with padding and clipping at +-n, forward and
// gradients (autograd of the module vs central finite differences of the naive formula).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/models/composite_attention.h"
#include "lib/models/convbert_mixed_attention.h"
#include "lib/models/light_dynamic_conv_block.h"

namespace cabert::models {
namespace {

using config::preset_config;

using torch::Tensor;

constexpr int64_t kB = 2, kT = 7;

// Real lengths 7 and 4: the second sequence has 3 padding positions.
Tensor test_mask() {
  Tensor mask = torch::ones({kB, kT}, torch::kBool);
  mask.index_put_({1, torch::indexing::Slice(4, kT)}, false);
  return mask;
}

// y = x W^T + b with loops.
Tensor naive_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const int64_t B = x.size(0), T = x.size(1), in = x.size(2), out = w.size(0);
  Tensor y = torch::zeros({B, T, out}, torch::kDouble);
  auto X = x.accessor<double, 3>();
  auto W = w.accessor<double, 2>();
  auto Y = y.accessor<double, 3>();
  for (int64_t n = 0; n < B; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = b.defined() ? b[o].item<double>() : 0.0;
        for (int64_t i = 0; i < in; ++i) s += X[n][t][i] * W[o][i];
        Y[n][t][o] = s;
      }
  return y;
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

// Centred depthwise conv over channels, padding reads zero, masked positions read zero and output zero.
Tensor naive_depthwise(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t pad, const Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = w.size(1);
  Tensor y = torch::zeros_like(x);
  auto X = x.accessor<double, 3>();
  auto W = w.accessor<double, 2>();
  auto Y = y.accessor<double, 3>();
  auto M = mask.accessor<bool, 2>();
  for (int64_t n = 0; n < B; ++n)
    for (int64_t t = 0; t < T; ++t) {
      if (!M[n][t]) continue;
      for (int64_t c = 0; c < C; ++c) {
        double s = bias.defined() ? bias[c].item<double>() : 0.0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t src = t + k - pad;
          if (src >= 0 && src < T && M[n][src]) s += W[c][k] * X[n][src][c];
        }
        Y[n][t][c] = s;
      }
    }
  return y;
}

// out[n,t,c] = sum_k kernels[n,t,h(c),k] x[n, t+k-pad, c] (per-position kernels; lightweight = same for all t).
Tensor naive_dynamic(const Tensor& x, const Tensor& kernels, int64_t pad, const Tensor& mask) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = kernels.size(2), K = kernels.size(3);
  Tensor y = torch::zeros_like(x);
  auto X = x.accessor<double, 3>();
  auto Kr = kernels.accessor<double, 4>();
  auto Y = y.accessor<double, 3>();
  auto M = mask.accessor<bool, 2>();
  for (int64_t n = 0; n < B; ++n)
    for (int64_t t = 0; t < T; ++t) {
      if (!M[n][t]) continue;
      for (int64_t c = 0; c < C; ++c) {
        const int64_t h = c / (C / H);
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t src = t + k - pad;
          if (src >= 0 && src < T && M[n][src]) s += Kr[n][t][h][k] * X[n][src][c];
        }
        Y[n][t][c] = s;
      }
    }
  return y;
}

Tensor softmax_last(const Tensor& logits) {  // loops, for the per-position conv kernels
  Tensor out = logits.clone();
  auto flat = out.view({-1, out.size(-1)});
  for (int64_t r = 0; r < flat.size(0); ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t k = 0; k < flat.size(1); ++k) mx = std::max(mx, flat[r][k].item<double>());
    for (int64_t k = 0; k < flat.size(1); ++k) sum += std::exp(flat[r][k].item<double>() - mx);
    for (int64_t k = 0; k < flat.size(1); ++k) flat[r][k] = std::exp(flat[r][k].item<double>() - mx) / sum;
  }
  return out;
}

// Scaled dot-product attention with the composite terms, masking padded keys, all in loops.
// beta [N, 2n+1], wq [2n+1, d], wk [2n+1, d] may be undefined.
Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, const Tensor& beta,
                       const Tensor& wq, const Tensor& wk, int64_t n, const Tensor& mask) {
  const int64_t B = q.size(0), T = q.size(1), C = q.size(2), d = C / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Tensor out = torch::zeros({B, T, C}, torch::kDouble);
  auto Q = q.accessor<double, 3>();
  auto Kx = k.accessor<double, 3>();
  auto V = v.accessor<double, 3>();
  auto O = out.accessor<double, 3>();
  auto M = mask.accessor<bool, 2>();
  auto r = [&](int64_t from, int64_t to) { return std::clamp<int64_t>(to - from, -n, n) + n; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> score(T, 0.0);
        double mx = -1e300;
        for (int64_t j = 0; j < T; ++j) {
          if (!M[b][j]) continue;
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += Q[b][i][h * d + e] * Kx[b][j][h * d + e];
          s *= scale;
          if (beta.defined()) s += beta[h][r(i, j)].item<double>();
          if (wq.defined()) {
            double t = 0;
            for (int64_t e = 0; e < d; ++e) t += Q[b][i][h * d + e] * wq[r(i, j)][e].item<double>();
            s += t * scale;
          }
          if (wk.defined()) {
            double t = 0;
            for (int64_t e = 0; e < d; ++e) t += Kx[b][j][h * d + e] * wk[r(j, i)][e].item<double>();
            s += t * scale;
          }
          score[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += M[b][j] ? std::exp(score[j] - mx) : 0.0;
        for (int64_t j = 0; j < T; ++j) {
          if (!M[b][j]) continue;
          const double p = std::exp(score[j] - mx) / sum;
          for (int64_t e = 0; e < d; ++e) O[b][i][h * d + e] += p * V[b][j][h * d + e];
        }
      }
  return out;
}

// Only real query positions carry meaning.
Tensor real_rows(const Tensor& y, const Tensor& mask) { return y * mask.unsqueeze(-1).to(torch::kDouble); }

pb::ModelConfig tiny(const std::string& preset) {
  pb::ModelConfig c = preset_config(preset);
  c.set_dropout(0), c.set_attention_dropout(0);
  c.mutable_conv_block()->set_weight_dropout(0);
  return c;
}

void randomise(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) p.normal_(0.0, 0.3);
}

// Checks forward equality and d(sum(w*y))/d(param) for the listed parameters (and x) against central
// differences of the naive function.
void check_against_naive(torch::nn::Module& module, const std::function<Tensor(const Tensor&)>& forward,
                         const std::function<Tensor(const Tensor&)>& naive, const Tensor& mask,
                         const std::vector<std::string>& gradient_params, int64_t hidden) {
  torch::manual_seed(3);
  Tensor x = torch::randn({kB, kT, hidden}, torch::kDouble).requires_grad_(true);
  Tensor y = forward(x);
  Tensor expected = naive(x.detach());
  ASSERT_EQ(y.sizes(), expected.sizes());
  EXPECT_TRUE(torch::allclose(real_rows(y, mask), real_rows(expected, mask), 1e-9, 1e-9))
      << "max difference " << (real_rows(y, mask) - real_rows(expected, mask)).abs().max().item<double>();

  Tensor w = torch::randn(y.sizes(), torch::kDouble);
  auto objective = [&](const Tensor& out) { return (real_rows(out, mask) * w).sum().item<double>(); };
  (real_rows(y, mask) * w).sum().backward();
  auto params = module.named_parameters();
  const double eps = 1e-6;
  auto check_tensor = [&](Tensor target, const Tensor& grad, const std::string& name,
                          const std::function<double()>& evaluate) {
    ASSERT_TRUE(grad.defined()) << name << " has no gradient";
    auto flat = target.view({-1});
    auto g = grad.reshape({-1});
    for (int64_t idx : {int64_t{0}, flat.size(0) / 2, flat.size(0) - 1}) {
      const double saved = flat[idx].item<double>();
      flat[idx] = saved + eps;
      const double up = evaluate();
      flat[idx] = saved - eps;
      const double down = evaluate();
      flat[idx] = saved;
      EXPECT_NEAR(g[idx].item<double>(), (up - down) / (2 * eps), 1e-5) << name << "[" << idx << "]";
    }
  };
  torch::NoGradGuard no_grad;
  for (const auto& name : gradient_params) {
    ASSERT_TRUE(params.contains(name)) << name;
    Tensor p = params[name];
    check_tensor(p, p.grad(), name, [&] { return objective(naive(x.detach())); });
  }
  Tensor x_copy = x.detach().clone();
  check_tensor(x_copy, x.grad(), "x", [&] { return objective(naive(x_copy)); });
}

Tensor param(torch::nn::Module& m, const std::string& name) {
  auto params = m.named_parameters();
  return params.contains(name) ? params[name].detach() : Tensor();
}

struct VariantCase {
  std::string preset;
  std::vector<std::string> gradient_params;
};

class BertAttentionVariant : public ::testing::TestWithParam<VariantCase> {};

TEST_P(BertAttentionVariant, MatchesNaiveLoopsWithPaddingAndClipping) {
  pb::ModelConfig config = tiny(GetParam().preset);
  config.set_hidden_size(8), config.set_num_heads(2);
  config.mutable_attention()->set_relative_radius(2);  // T = 7 > 2n+1: clipping at +-n is exercised
  BertSelfAttention attention(config);
  attention->to(torch::kDouble);
  randomise(*attention);
  Tensor mask = test_mask();
  const int64_t n = 2, H = 8, N = 2;
  auto project = [&](const Tensor& x, const std::string& name) {
    Tensor linear = naive_linear(x, param(*attention, name + ".weight"), param(*attention, name + ".bias"));
    if (!param(*attention, name + "_conv.depthwise_weight").defined()) return linear;
    Tensor conv = naive_depthwise(x, param(*attention, name + "_conv.depthwise_weight"),
                                  param(*attention, name + "_conv.depthwise_bias"), n, mask);
    for (double* v = conv.data_ptr<double>(); v != conv.data_ptr<double>() + conv.numel(); ++v) *v = gelu(*v);
    conv = naive_linear(conv, param(*attention, name + "_conv.pointwise.weight"),
                        param(*attention, name + "_conv.pointwise.bias"));
    return torch::cat({conv, linear}, -1);  // the first half of the heads is convolutional
  };
  auto naive = [&](const Tensor& x) {
    Tensor v = project(x, "value");
    Tensor out = naive_attention(project(x, "query"), project(x, "key"), v, N, param(*attention, "relative_beta"),
                                 param(*attention, "relative_query"), param(*attention, "relative_key"), n, mask);
    Tensor dw = param(*attention, "depthwise_weight");
    if (dw.defined()) {
      Tensor conv = naive_depthwise(v, dw, param(*attention, "depthwise_bias"), n, mask);
      Tensor scale = param(*attention, "depthwise_scale");
      for (int64_t c = 0; c < H; ++c) {
        out.select(2, c).add_(conv.select(2, c) * scale[c / (H / N)].item<double>());
      }
    }
    return out;
  };
  check_against_naive(
      *attention, [&](const Tensor& x) { return attention(x, mask); }, naive, mask, GetParam().gradient_params, H);
}

INSTANTIATE_TEST_SUITE_P(
    AllVariants, BertAttentionVariant,
    ::testing::Values(VariantCase{"bert-tiny-absolute", {"query.weight", "value.bias"}},
                      VariantCase{"bert-tiny-none", {"key.weight"}}, VariantCase{"bert-tiny-fixed", {"relative_beta"}},
                      VariantCase{"bert-tiny-dynamic", {"relative_query"}},
                      VariantCase{"bert-tiny-composite", {"relative_beta", "relative_query", "query.weight"}},
                      VariantCase{"bert-tiny-composite-key", {"relative_beta", "relative_query", "relative_key"}},
                      VariantCase{"bert-tiny-depthwise", {"depthwise_weight", "depthwise_bias", "depthwise_scale"}},
                      VariantCase{"bert-tiny-composite-depthwise", {"relative_beta", "depthwise_weight"}},
                      VariantCase{"bert-tiny-conv-qk", {"query_conv.depthwise_weight", "key_conv.pointwise.weight"}},
                      VariantCase{"bert-tiny-conv-v", {"value_conv.depthwise_weight", "value_conv.depthwise_bias"}},
                      VariantCase{"bert-tiny-conv-qkv", {"query_conv.depthwise_bias", "value_conv.pointwise.bias"}},
                      VariantCase{"bert-tiny-composite-conv-qkv", {"relative_query", "key_conv.depthwise_weight"}}),
    [](const auto& info) {
      std::string name = info.param.preset.substr(10);
      for (auto& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

class ConvBertBranch : public ::testing::TestWithParam<pb::ConvBertConvKind> {};

TEST_P(ConvBertBranch, MatchesNaiveLoops) {
  pb::ModelConfig config = tiny("convbert-tiny");
  config.set_hidden_size(8), config.set_num_heads(4);  // 2 attention heads of 2 + 2 conv heads of 2
  config.mutable_convbert()->set_conv_kernel_size(3);
  config.mutable_convbert()->set_conv_kind(GetParam());
  MixedAttention attention(config);
  attention->to(torch::kDouble);
  randomise(*attention);
  Tensor mask = test_mask();
  const int64_t k = 3, heads = 2;
  auto p = [&](const std::string& name) { return param(*attention, name); };
  auto naive = [&](const Tensor& x) {
    Tensor q = naive_linear(x, p("query.weight"), p("query.bias"));
    Tensor ctx = naive_attention(q, naive_linear(x, p("key.weight"), p("key.bias")),
                                 naive_linear(x, p("value.weight"), p("value.bias")), heads, {}, {}, {}, 0, mask);
    if (GetParam() == pb::NO_CONV) return ctx;
    auto sepconv = [&] {
      Tensor dw = naive_depthwise(x, p("key_conv.depthwise_weight"), {}, k / 2, mask);
      return naive_linear(dw, p("key_conv.pointwise.weight"), p("key_conv.pointwise.bias"));
    };
    Tensor conv;
    if (GetParam() == pb::DEPTHWISE_SEPARABLE) {
      conv = sepconv() * mask.unsqueeze(-1).to(torch::kDouble);
    } else {
      Tensor kernel_input = GetParam() == pb::SDCONV ? sepconv() * q : x;
      Tensor kernels = softmax_last(
          naive_linear(kernel_input, p("conv_kernel.weight"), p("conv_kernel.bias")).view({kB, kT, heads, k}));
      conv = naive_dynamic(naive_linear(x, p("conv_value.weight"), p("conv_value.bias")), kernels, k / 2, mask);
    }
    return torch::cat({ctx, conv}, -1);
  };
  std::vector<std::string> grads = {"query.weight"};
  if (GetParam() == pb::SDCONV) grads = {"key_conv.depthwise_weight", "conv_kernel.weight", "conv_value.bias"};
  if (GetParam() == pb::PLAIN_DYNAMIC) grads = {"conv_kernel.bias", "conv_value.weight"};
  if (GetParam() == pb::DEPTHWISE_SEPARABLE) grads = {"key_conv.depthwise_weight", "key_conv.pointwise.weight"};
  check_against_naive(
      *attention, [&](const Tensor& x) { return attention(x, mask); }, naive, mask, grads, 8);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ConvBertBranch,
                         ::testing::Values(pb::SDCONV, pb::PLAIN_DYNAMIC, pb::DEPTHWISE_SEPARABLE, pb::NO_CONV),
                         [](const auto& info) { return pb::ConvBertConvKind_Name(info.param); });

class WuConvBlock : public ::testing::TestWithParam<std::tuple<std::string, bool, bool>> {};

TEST_P(WuConvBlock, MatchesNaiveLoops) {
  // Not a structured binding: the lambda below captures glu, which clang 14 (scripts/sanitize.sh) refuses.
  const std::string& preset = std::get<0>(GetParam());
  const bool glu = std::get<1>(GetParam()), causal = std::get<2>(GetParam());
  pb::ModelConfig config = tiny(preset);
  config.set_hidden_size(8), config.set_num_heads(2);
  config.mutable_conv_block()->clear_kernel_sizes();
  config.mutable_conv_block()->add_kernel_sizes(5);
  config.mutable_conv_block()->set_glu(glu);
  config.mutable_conv_block()->set_causal(causal);
  ConvBlock block(config, 0);
  block->to(torch::kDouble);
  randomise(*block);
  Tensor mask = test_mask();
  const int64_t K = 5, pad = causal ? 4 : 2, H = 2;
  const bool dynamic = preset.rfind("dynamic", 0) == 0;
  auto naive = [&](const Tensor& x) {
    Tensor y = naive_linear(x, param(*block, "input.weight"), param(*block, "input.bias"));
    if (glu) y = y.narrow(2, 0, 8) * torch::sigmoid(y.narrow(2, 8, 8));
    Tensor kernels;
    if (dynamic) {
      kernels = softmax_last(naive_linear(y, param(*block, "kernel_projection.weight"), {}).view({kB, kT, H, K}));
    } else {
      kernels = softmax_last(param(*block, "weight").clone()).view({1, 1, H, K}).expand({kB, kT, H, K}).contiguous();
    }
    return naive_dynamic(y, kernels, pad, mask);
  };
  std::vector<std::string> grads = {"input.weight", dynamic ? "kernel_projection.weight" : "weight"};
  check_against_naive(
      *block, [&](const Tensor& x) { return block(x, mask); }, naive, mask, grads, 8);
}

INSTANTIATE_TEST_SUITE_P(LightAndDynamic, WuConvBlock,
                         ::testing::Combine(::testing::Values("lightconv-tiny", "dynamicconv-tiny"), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return str(std::get<0>(info.param).substr(0, std::get<0>(info.param).find('-')),
                                      std::get<1>(info.param) ? "_glu" : "_linear",
                                      std::get<2>(info.param) ? "_causal" : "_centred");
                         });

TEST(WuConvBlockOptions, DropConnectOnlyWhileTraining) {
  pb::ModelConfig config = preset_config("lightconv-tiny");
  config.mutable_conv_block()->set_weight_dropout(0.5);
  ConvBlock block(config, 1);
  Tensor x = torch::randn({2, 9, config.hidden_size()});
  Tensor mask = torch::ones({2, 9}, torch::kBool);
  torch::manual_seed(1);
  Tensor a = block(x, mask);
  Tensor b = block(x, mask);
  EXPECT_FALSE(torch::allclose(a, b)) << "the normalised kernel was not dropped";
  block->eval();
  EXPECT_TRUE(torch::equal(block(x, mask), block(x, mask)));
}

TEST(WuConvBlockOptions, UnsharedWeightsGiveOneKernelPerChannel) {
  pb::ModelConfig config = tiny("lightconv-tiny");
  config.set_hidden_size(8), config.set_num_heads(2);
  config.mutable_conv_block()->set_share_weights_across_channels(false);
  config.mutable_conv_block()->set_glu(false);
  ConvBlock block(config, 0);  // kernel 3
  block->to(torch::kDouble);
  randomise(*block);
  EXPECT_EQ(block->weight.sizes(), (std::vector<int64_t>{8, 3}));
  Tensor mask = test_mask();
  auto naive = [&](const Tensor& x) {
    Tensor y = naive_linear(x, param(*block, "input.weight"), param(*block, "input.bias"));
    Tensor kernels =
        softmax_last(param(*block, "weight").clone()).view({1, 1, 8, 3}).expand({kB, kT, 8, 3}).contiguous();
    return naive_dynamic(y, kernels, 1, mask);
  };
  check_against_naive(
      *block, [&](const Tensor& x) { return block(x, mask); }, naive, mask, {"weight"}, 8);
}

}  // namespace
}  // namespace cabert::models
