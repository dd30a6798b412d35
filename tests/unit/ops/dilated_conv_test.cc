// The dilated depthwise convolution against a plain loop over taps: forward for every dilation, kernel size
// and padding, masking, gradients of both inputs, and causality.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ops/conv_ops.h"

namespace cabert::ops {
namespace {

// out[:, t, :] = sum_k weight[:, k] * x[:, t + k * dilation - padding_left, :], built from tensor arithmetic so
// that autograd differentiates it; masked inputs are zeroed first and masked outputs last.
torch::Tensor reference(const torch::Tensor& x, const torch::Tensor& weight, int64_t dilation, int64_t padding_left,
                        const torch::Tensor& mask = {}) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = weight.size(1);
  torch::Tensor input = mask.defined() ? x * mask.unsqueeze(-1).to(x.scalar_type()) : x;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor sum = torch::zeros({B, C}, x.options().requires_grad(false));
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = t + k * dilation - padding_left;
      if (s >= 0 && s < T) sum = sum + input.select(1, s) * weight.select(1, k);
    }
    steps.push_back(sum);
  }
  torch::Tensor out = torch::stack(steps, 1);
  return mask.defined() ? out * mask.unsqueeze(-1).to(x.scalar_type()) : out;
}

std::string name(int64_t dilation, int64_t K, int64_t padding_left, int64_t T) {
  return "dilation=" + std::to_string(dilation) + " K=" + std::to_string(K) +
         " padding_left=" + std::to_string(padding_left) + " T=" + std::to_string(T);
}

TEST(DilatedDepthwiseConv, ForwardMatchesTheTapLoop) {
  torch::manual_seed(1);
  for (int64_t dilation : {1, 2, 4}) {
    for (int64_t K : {1, 3, 5}) {
      for (int64_t padding_left : {(K - 1) * dilation, (K - 1) * dilation / 2}) {
        for (int64_t T : {1, 7}) {
          SCOPED_TRACE(name(dilation, K, padding_left, T));
          torch::Tensor x = torch::randn({2, T, 3}, torch::kDouble);
          torch::Tensor w = torch::randn({3, K}, torch::kDouble);
          torch::Tensor out = dilated_depthwise_conv(x, w, dilation, padding_left);
          ASSERT_EQ(out.sizes(), x.sizes());
          EXPECT_TRUE(torch::allclose(out, reference(x, w, dilation, padding_left), 1e-12, 1e-12));
        }
      }
    }
  }
}

TEST(DilatedDepthwiseConv, MaskedPositionsNeitherContributeNorOutput) {
  torch::manual_seed(2);
  const int64_t T = 7, real = 4;
  torch::Tensor mask = torch::ones({2, T}, torch::kBool);
  mask[1].narrow(0, real, T - real).fill_(false);
  for (int64_t dilation : {1, 2}) {
    for (int64_t K : {3, 5}) {
      for (int64_t padding_left : {(K - 1) * dilation, (K - 1) * dilation / 2}) {
        SCOPED_TRACE(name(dilation, K, padding_left, T));
        torch::Tensor x = torch::randn({2, T, 3}, torch::kDouble);
        x[1].narrow(0, real, T - real).fill_(1e6);  // garbage at the padding: must not leak into real outputs
        torch::Tensor w = torch::randn({3, K}, torch::kDouble);
        torch::Tensor out = dilated_depthwise_conv(x, w, dilation, padding_left, mask);
        EXPECT_TRUE(torch::allclose(out, reference(x, w, dilation, padding_left, mask), 1e-12, 1e-12));
        EXPECT_TRUE(torch::equal(out[1].narrow(0, real, T - real), torch::zeros({T - real, 3}, torch::kDouble)));
        EXPECT_LT(out[1].narrow(0, 0, real).abs().max().item<double>(), 1e3);
      }
    }
  }
}

TEST(DilatedDepthwiseConv, GradientsMatchTheTapLoop) {
  torch::manual_seed(3);
  const int64_t T = 7;
  torch::Tensor mask = torch::ones({2, T}, torch::kBool);
  mask[0].narrow(0, 5, 2).fill_(false);
  for (bool masked : {false, true}) {
    for (int64_t dilation : {1, 2, 4}) {
      for (int64_t K : {1, 3, 5}) {
        for (int64_t padding_left : {(K - 1) * dilation, (K - 1) * dilation / 2}) {
          SCOPED_TRACE(name(dilation, K, padding_left, T) + (masked ? " masked" : ""));
          torch::Tensor m = masked ? mask : torch::Tensor();
          torch::Tensor x = torch::randn({2, T, 3}, torch::kDouble).requires_grad_(true);
          torch::Tensor w = torch::randn({3, K}, torch::kDouble).requires_grad_(true);
          torch::Tensor g = torch::randn({2, T, 3}, torch::kDouble);
          auto grads =
              torch::autograd::grad({(dilated_depthwise_conv(x, w, dilation, padding_left, m) * g).sum()}, {x, w});
          auto expected = torch::autograd::grad({(reference(x, w, dilation, padding_left, m) * g).sum()}, {x, w});
          EXPECT_TRUE(torch::allclose(grads[0], expected[0], 1e-10, 1e-10)) << "d/dx";
          EXPECT_TRUE(torch::allclose(grads[1], expected[1], 1e-10, 1e-10)) << "d/dweight";
        }
      }
    }
  }
}

TEST(DilatedDepthwiseConv, CausalPaddingNeverSeesTheFuture) {
  torch::manual_seed(4);
  torch::NoGradGuard no_grad;
  const int64_t T = 9;
  for (int64_t dilation : {1, 2, 4}) {
    const int64_t K = 3, padding_left = (K - 1) * dilation;
    torch::Tensor x = torch::randn({2, T, 4});
    torch::Tensor w = torch::randn({4, K});
    torch::Tensor a = dilated_depthwise_conv(x, w, dilation, padding_left);
    for (int64_t t = 0; t + 1 < T; ++t) {
      SCOPED_TRACE(name(dilation, K, padding_left, T) + " t=" + std::to_string(t));
      torch::Tensor changed = x.clone();
      changed.select(1, t + 1).normal_();
      torch::Tensor b = dilated_depthwise_conv(changed, w, dilation, padding_left);
      EXPECT_TRUE(torch::equal(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1)));
      EXPECT_FALSE(torch::equal(a.select(1, t + 1), b.select(1, t + 1)));  // tap k = K-1 reads x[t + 1]
    }
  }
}

}  // namespace
}  // namespace cabert::ops
