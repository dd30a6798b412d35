// `--cuda-attention tiles` on a CUDA device (kernels/cuda/attention_cuda_kernels.cuh; the same kernels run on the
// CPU in tests/kernels/attention_cuda_emulated_test.cc): against the CPU kernel in double (1e-10) and float, with
// the reference's dropout masks, through the models' entry point (weights, autograd), two runs bit for bit, and
// what it leaves to the blocks. Skipped where the build has no CUDA kernels or the machine no CUDA device.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>

#include "kernels/attention_kernels.h"
#include "lib/ops/attention_ops.h"
#include "lib/ops/kernel_path.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/conv_test_util.h"

namespace cabert {
namespace {

using testing::cuda0;

kernels::AttentionInputs on_cuda(const kernels::AttentionInputs& in) {
  kernels::AttentionInputs moved = in;
  for (torch::Tensor* t : {&moved.q, &moved.k, &moved.v, &moved.query_band, &moved.key_band, &moved.key_mask}) {
    if (t->defined()) *t = t->to(cuda0());
  }
  return moved;
}

struct AttentionRun {
  kernels::AttentionOutputs outputs;
  kernels::AttentionGrads grads;
};

AttentionRun run_attention(const kernels::AttentionInputs& in, const torch::Tensor& dout) {
  AttentionRun r;
  r.outputs = kernels::relative_attention_forward(in);
  r.grads = kernels::relative_attention_backward(dout, in, r.outputs);
  return r;
}

void expect_near(const torch::Tensor& got, const torch::Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  const double error = (got.cpu().to(torch::kDouble) - want.to(torch::kDouble)).abs().max().item<double>();
  EXPECT_LE(error, tolerance * (1 + want.abs().max().item<double>())) << what;
}

void expect_same(const AttentionRun& got, const AttentionRun& want, double tolerance, const std::string& where) {
  expect_near(got.outputs.out, want.outputs.out, tolerance, where + " out");
  expect_near(got.outputs.logsumexp, want.outputs.logsumexp, tolerance, where + " logsumexp");
  expect_near(got.grads.q, want.grads.q, tolerance, where + " dq");
  expect_near(got.grads.k, want.grads.k, tolerance, where + " dk");
  expect_near(got.grads.v, want.grads.v, tolerance, where + " dv");
  expect_near(got.grads.query_band, want.grads.query_band, tolerance, where + " d query band");
  expect_near(got.grads.key_band, want.grads.key_band, tolerance, where + " d key band");
}

TEST(CudaTiledAttention, MatchesTheCpuKernelWithItsDropoutMasks) {
  CABERT_REQUIRE_CUDA();
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kTiles);
  struct Case {
    torch::ScalarType dtype;
    int64_t batch, heads, length, dim, radius;
    double dropout, tolerance;
  };
  const Case cases[] = {{torch::kDouble, 2, 3, 70, 16, 4, 0.3, 1e-10},  {torch::kDouble, 1, 2, 1, 8, 0, 0.0, 1e-10},
                        {torch::kDouble, 2, 2, 300, 64, 8, 0.1, 1e-10}, {torch::kDouble, 2, 1, 45, 128, 50, 0.2, 1e-10},
                        {torch::kFloat, 2, 4, 300, 64, 8, 0.1, 5e-5},   {torch::kFloat, 3, 2, 129, 40, 3, 0.0, 5e-5}};
  for (const Case& c : cases) {
    const std::string where = str(c10::toString(c.dtype), " B=", c.batch, " N=", c.heads, " T=", c.length, " d=", c.dim,
                                  " n=", c.radius, " p=", c.dropout);
    torch::manual_seed(60);
    kernels::AttentionInputs in = testing::banded_inputs(c.batch, c.heads, c.length, c.dim, c.radius, 0.3,
                                                         torch::TensorOptions().dtype(torch::kDouble));
    in.key_mask = testing::ragged_mask(c.batch, c.length);
    in.dropout = {c.dropout, 321, 7};
    const torch::Tensor dout = torch::randn({c.batch, c.heads, c.length, c.dim}, torch::kDouble);
    kernels::AttentionInputs typed = in;
    for (torch::Tensor* t : {&typed.q, &typed.k, &typed.v, &typed.query_band, &typed.key_band}) *t = t->to(c.dtype);
    const AttentionRun got = run_attention(on_cuda(typed), dout.to(c.dtype).to(cuda0()));
    EXPECT_TRUE(got.outputs.tiled) << where;
    expect_same(got, run_attention(in, dout), c.tolerance, where);
  }
}

// The models' form: ops::composite_attention with the weights under autograd, on the fused path, float.
TEST(CudaTiledAttention, TheModelsEntryPointMatchesTheCpu) {
  CABERT_REQUIRE_CUDA();
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kTiles);
  const ops::ScopedKernelPath path(ops::KernelPath::kFused);
  torch::manual_seed(61);
  const int64_t B = 2, N = 4, T = 200, d = 64, radius = 8, width = 2 * radius + 1;
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  std::vector<torch::Tensor> inputs = {torch::randn({B, N, T, d}, options), torch::randn({B, N, T, d}, options),
                                       torch::randn({B, N, T, d}, options), torch::randn({width, d}, options),
                                       torch::randn({N, width}, options),   torch::randn({width, d}, options)};
  const torch::Tensor mask = testing::ragged_mask(B, T);
  const torch::Tensor dout = torch::randn({B, N, T, d}, options);
  auto grads_on = [&](const torch::Device& device) {
    std::vector<torch::Tensor> leaves;
    for (const torch::Tensor& t : inputs) leaves.push_back(t.to(device).detach().requires_grad_());
    const torch::Tensor out = ops::composite_attention(
        leaves[0], leaves[1], leaves[2], {leaves[3], leaves[4], leaves[5], radius}, mask.to(device), 0.125, 0.0);
    std::vector<torch::Tensor> results = torch::autograd::grad({out}, leaves, {dout.to(device)});
    results.insert(results.begin(), out.detach());
    return results;
  };
  const std::vector<torch::Tensor> cpu = grads_on(torch::kCPU), cuda = grads_on(cuda0());
  const char* names[] = {"out", "dq", "dk", "dv", "dW^C", "d beta", "dW^K'"};
  for (size_t i = 0; i < cpu.size(); ++i) expect_near(cuda[i], cpu[i], 5e-5, names[i]);
}

TEST(CudaTiledAttention, TwoRunsAreBitwiseEqual) {
  CABERT_REQUIRE_CUDA();
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kTiles);
  torch::manual_seed(62);
  kernels::AttentionInputs in = on_cuda(testing::banded_inputs(2, 4, 513, 64, 8, 0.125));
  in.dropout = {0.1, 5, 0};
  const torch::Tensor dout = torch::randn({2, 4, 513, 64}, torch::TensorOptions().device(cuda0()));
  const AttentionRun first = run_attention(in, dout), second = run_attention(in, dout);
  EXPECT_TRUE(torch::equal(first.outputs.out, second.outputs.out));
  EXPECT_TRUE(torch::equal(first.grads.q, second.grads.q));
  EXPECT_TRUE(torch::equal(first.grads.k, second.grads.k));
  EXPECT_TRUE(torch::equal(first.grads.v, second.grads.v));
  EXPECT_TRUE(torch::equal(first.grads.query_band, second.grads.query_band));
  EXPECT_TRUE(torch::equal(first.grads.key_band, second.grads.key_band));
}

// A batch row without a real key, or a head wider than 128: the blocks, with the CPU kernel's numbers.
TEST(CudaTiledAttention, LeavesWhatItDoesNotTakeToTheBlocks) {
  CABERT_REQUIRE_CUDA();
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kTiles);
  torch::manual_seed(63);
  for (int64_t d : {16, 160}) {
    kernels::AttentionInputs in = testing::banded_inputs(2, 2, 40, d, 3, 0.25, torch::kDouble);
    in.key_mask = torch::ones({2, 40}, torch::kBool);
    if (d == 16) in.key_mask.index_put_({1}, false);
    const torch::Tensor dout = torch::randn({2, 2, 40, d}, torch::kDouble);
    const AttentionRun got = run_attention(on_cuda(in), dout.to(cuda0()));
    EXPECT_FALSE(got.outputs.tiled) << "d=" << d;
    expect_same(got, run_attention(in, dout), 1e-10, "d=" + std::to_string(d));
  }
}

}  // namespace
}  // namespace cabert
