// Mixed precision (issue 15): under bfloat16 autocast on CPU, and given bfloat16 tensors, every convolution
// and relative-position op runs in float32 on both kernel paths, matches its float32 result, and sends
// gradients back in each input's own dtype.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "lib/ops/conv_ops.h"
#include "lib/ops/kernel_path.h"
#include "lib/ops/mixed_precision.h"

namespace cabert::ops {
namespace {

struct Inputs {
  torch::Tensor x, weight, kernels, dw_weight, bias, q, w, beta, mask;
};

Inputs make_inputs() {
  torch::manual_seed(3);
  const int64_t B = 2, T = 9, C = 8, H = 2, K = 5, n = 3;
  Inputs in;
  in.x = torch::randn({B, T, C});
  in.weight = torch::softmax(torch::randn({H, K}), -1);
  in.kernels = torch::softmax(torch::randn({B, T, H, K}), -1);
  in.dw_weight = torch::randn({C, K});
  in.bias = torch::randn({C});
  in.q = torch::randn({B, H, T, C / H});
  in.w = torch::randn({2 * n + 1, C / H});
  in.beta = torch::randn({H, 2 * n + 1});
  in.mask = torch::ones({B, T}, torch::kBool);
  in.mask[1].narrow(0, 6, 3).fill_(false);
  return in;
}

// Each op on (possibly bf16) leaves: the outputs, summed into one number per op.
std::vector<torch::Tensor> run_ops(const Inputs& in) {
  return {lightweight_conv(in.x, in.weight, 2, in.mask), dynamic_conv(in.x, in.kernels, 2, in.mask),
          depthwise_conv(in.x, in.dw_weight, in.bias, 2, in.mask),
          relative_position_scores(in.q, in.w, in.beta, 3, 0.5)};
}

class MixedPrecision : public ::testing::TestWithParam<KernelPath> {};

TEST_P(MixedPrecision, OpsUnderCpuAutocastMatchFloat32) {
  ScopedKernelPath path(GetParam());
  Inputs in = make_inputs();
  std::vector<torch::Tensor> expected = run_ops(in);
  std::vector<torch::Tensor> got;
  {
    AutocastScope autocast(true, torch::Device(torch::kCPU));
    got = run_ops(in);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].scalar_type(), torch::kFloat) << "op " << i;
    EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-5, 1e-6)) << "op " << i;
  }
}

TEST_P(MixedPrecision, Bfloat16InputsRunInFloatAndGetBfloat16Gradients) {
  ScopedKernelPath path(GetParam());
  Inputs in = make_inputs();
  Inputs low;
  auto leaf = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).requires_grad_(true); };
  low.x = leaf(in.x), low.weight = leaf(in.weight), low.kernels = leaf(in.kernels), low.dw_weight = leaf(in.dw_weight);
  low.bias = leaf(in.bias), low.q = leaf(in.q), low.w = leaf(in.w), low.beta = leaf(in.beta), low.mask = in.mask;
  // The float32 reference sees exactly the bf16-rounded values.
  Inputs rounded;
  auto up = [](const torch::Tensor& t) { return t.detach().to(torch::kFloat).requires_grad_(true); };
  rounded.x = up(low.x), rounded.weight = up(low.weight), rounded.kernels = up(low.kernels);
  rounded.dw_weight = up(low.dw_weight), rounded.bias = up(low.bias), rounded.q = up(low.q), rounded.w = up(low.w);
  rounded.beta = up(low.beta), rounded.mask = in.mask;
  std::vector<torch::Tensor> got, expected;
  {
    AutocastScope autocast(true, torch::Device(torch::kCPU));
    got = run_ops(low);
  }
  expected = run_ops(rounded);
  torch::Tensor total = torch::zeros({});
  torch::Tensor reference_total = torch::zeros({});
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].scalar_type(), torch::kFloat) << "op " << i;
    EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-5, 1e-6)) << "op " << i;
    total = total + (got[i] * got[i]).sum();
    reference_total = reference_total + (expected[i] * expected[i]).sum();
  }
  total.backward();
  reference_total.backward();
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs = {{low.x, rounded.x},
                                                                {low.weight, rounded.weight},
                                                                {low.kernels, rounded.kernels},
                                                                {low.dw_weight, rounded.dw_weight},
                                                                {low.bias, rounded.bias},
                                                                {low.q, rounded.q},
                                                                {low.w, rounded.w},
                                                                {low.beta, rounded.beta}};
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [bf16, f32] = pairs[i];
    ASSERT_TRUE(bf16.grad().defined()) << "input " << i;
    EXPECT_EQ(bf16.grad().scalar_type(), torch::kBFloat16) << "input " << i;
    // The float gradient within bf16 rounding (x's three contributions are added in bf16).
    EXPECT_TRUE(torch::allclose(bf16.grad().to(torch::kFloat), f32.grad(), 2e-2, 2e-2)) << "input " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BothPaths, MixedPrecision, ::testing::Values(KernelPath::kFused, KernelPath::kReference),
                         [](const auto& info) { return kernel_path_name(info.param); });

}  // namespace
}  // namespace cabert::ops
