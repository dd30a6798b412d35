// CUDA paths (label gpu): every fused op on a CUDA device against the same op on the CPU (fused kernels, whose
// agreement with the reference the CPU tests establish), forward and every gradient, over the CPU tests' case
// grid (odd and even K, K > T, causal / centred / zero padding, masks, B = 1, T = 1), in double (1e-10) and
// float (1e-4); the attention kernel with dropout; Philox dropout bitwise; non-contiguous inputs, a side
// stream, a second device, bf16 autocast, repeatability, large shapes, and `pretrain --device cuda` with both
// kernel paths. Every test skips where the build has no CUDA kernels or the machine no CUDA device.
#include <gtest/gtest.h>

#include <c10/core/DeviceGuard.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "kernels/attention_kernels.h"
#include "kernels/build_info.h"
#include "kernels/chunked/attention_chunked.h"
#include "kernels/dropout_kernels.h"
#include "kernels/reference/attention_reference.h"
#include "lib/core/errors.h"
#include "lib/ops/attention_ops.h"
#include "lib/ops/conv_ops.h"
#include "lib/ops/device.h"
#include "lib/ops/mixed_precision.h"
#include "lib/ops/span_dynamic_conv.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/conv_test_util.h"
#include "tests/test_paths.h"

#ifdef CABERT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cabert {
namespace {

using ops::KernelPath;
using testing::conv_cases;
using testing::ConvCase;
using testing::cuda0;
using testing::Op;
using testing::OpRun;
using testing::ragged_mask;
using testing::run_on_path;

std::vector<torch::Tensor> to_device(const std::vector<torch::Tensor>& tensors, const torch::Device& device) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.defined() ? t.to(device) : t);
  return out;
}

// The op on CUDA (inputs, probe and mask moved there) against the op on the CPU, both on the fused path.
void expect_cuda_matches_cpu(const std::function<Op(const torch::Device&)>& make_op,
                             const std::vector<torch::Tensor>& inputs, const torch::Tensor& probe,
                             const std::string& where, double tolerance) {
  const OpRun cpu = run_on_path(KernelPath::kFused, make_op(torch::kCPU), inputs, probe);
  const OpRun cuda = run_on_path(KernelPath::kFused, make_op(cuda0()), to_device(inputs, cuda0()), probe.to(cuda0()));
  ASSERT_TRUE(cuda.out.is_cuda()) << where;
  EXPECT_TRUE(torch::allclose(cuda.out.cpu(), cpu.out, tolerance, tolerance))
      << where << ": output, max diff " << (cuda.out.cpu() - cpu.out).abs().max().item<double>();
  ASSERT_EQ(cuda.grads.size(), cpu.grads.size());
  for (size_t i = 0; i < cpu.grads.size(); ++i) {
    EXPECT_TRUE(torch::allclose(cuda.grads[i].cpu(), cpu.grads[i], tolerance, tolerance))
        << where << ": gradient of input " << i << ", max diff "
        << (cuda.grads[i].cpu() - cpu.grads[i]).abs().max().item<double>();
  }
}

struct DtypeCase {
  torch::Dtype dtype;
  double tolerance;
  const char* name;
};
const DtypeCase kDtypes[] = {{torch::kDouble, 1e-10, "double"}, {torch::kFloat, 1e-4, "float"}};

TEST(CudaKernels, ConvOpsMatchTheCpuOverTheCaseGrid) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(41);
  const int64_t C = 6, H = 3;
  for (const DtypeCase& dtype : kDtypes) {
    const auto options = torch::TensorOptions().dtype(dtype.dtype);
    for (const ConvCase& c : conv_cases({1, 2, 5, 9, 40}, {1, 2, 3, 4, 7, 12, 31})) {
      const torch::Tensor mask = c.masked ? ragged_mask(c.batch, c.length) : torch::Tensor();
      auto masked_on = [mask](const torch::Device& device) { return mask.defined() ? mask.to(device) : mask; };
      const torch::Tensor probe = torch::randn({c.batch, c.length, C}, options);
      const std::string where = std::string(dtype.name) + " " + c.name();
      expect_cuda_matches_cpu(
          [&](const torch::Device& device) -> Op {
            const torch::Tensor m = masked_on(device);
            return
                [m, c](const std::vector<torch::Tensor>& in) { return ops::lightweight_conv(in[0], in[1], c.pad, m); };
          },
          {torch::randn({c.batch, c.length, C}, options), torch::randn({H, c.kernel_size}, options)}, probe,
          "lightweight " + where, dtype.tolerance);
      expect_cuda_matches_cpu(
          [&](const torch::Device& device) -> Op {
            const torch::Tensor m = masked_on(device);
            return [m, c](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], c.pad, m); };
          },
          {torch::randn({c.batch, c.length, C}, options), torch::randn({c.batch, c.length, H, c.kernel_size}, options)},
          probe, "dynamic " + where, dtype.tolerance);
      expect_cuda_matches_cpu(
          [&](const torch::Device& device) -> Op {
            const torch::Tensor m = masked_on(device);
            return [m, c](const std::vector<torch::Tensor>& in) {
              return ops::depthwise_conv(in[0], in[1], in[2], c.pad, m);
            };
          },
          {torch::randn({c.batch, c.length, C}, options), torch::randn({C, c.kernel_size}, options),
           torch::randn({C}, options)},
          probe, "depthwise " + where, dtype.tolerance);
      expect_cuda_matches_cpu(
          [&](const torch::Device& device) -> Op {
            const torch::Tensor m = masked_on(device);
            return [m, c](const std::vector<torch::Tensor>& in) {
              return ops::span_dynamic_conv(in[0], in[1], in[2], in[3], in[4], H, c.pad, m);
            };
          },
          {torch::randn({c.batch, c.length, C}, options), torch::randn({c.batch, c.length, C}, options),
           torch::randn({c.batch, c.length, C}, options), torch::randn({H * c.kernel_size, C}, options),
           torch::randn({H * c.kernel_size}, options)},
          probe, "span dynamic " + where, dtype.tolerance);
    }
  }
}

TEST(CudaKernels, RelativePositionsAndCompositeAttentionMatchTheCpu) {
  CABERT_REQUIRE_CUDA();
  // The fused routes themselves: --cuda-attention auto hands problems this small to the reference.
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kRegions);
  torch::manual_seed(42);
  for (const DtypeCase& dtype : kDtypes) {
    const auto options = torch::TensorOptions().dtype(dtype.dtype);
    for (int64_t batch : {1, 2})
      for (int64_t length : {1, 5, 37, 300})
        for (int64_t radius : {0, 1, 8}) {
          const int64_t heads = 2, d = 8, width = 2 * radius + 1;
          const std::string where = str(dtype.name, " B=", batch, " T=", length, " radius=", radius);
          expect_cuda_matches_cpu(
              [&](const torch::Device&) -> Op {
                return [radius](const std::vector<torch::Tensor>& in) {
                  return ops::relative_position_scores(in[0], in[1], in[2], radius, 0.3);
                };
              },
              {torch::randn({batch, heads, length, d}, options), torch::randn({width, d}, options),
               torch::randn({heads, width}, options)},
              torch::randn({batch, heads, length, length}, options), "relpos " + where, dtype.tolerance);
          const torch::Tensor mask = ragged_mask(batch, length);
          expect_cuda_matches_cpu(
              [&](const torch::Device& device) -> Op {
                const torch::Tensor m = mask.to(device);
                return [m, radius](const std::vector<torch::Tensor>& in) {
                  return ops::composite_attention(in[0], in[1], in[2], {in[3], in[4], in[5], radius}, m, 0.3, 0.0);
                };
              },
              {torch::randn({batch, heads, length, d}, options), torch::randn({batch, heads, length, d}, options),
               torch::randn({batch, heads, length, d}, options), torch::randn({width, d}, options),
               torch::randn({heads, width}, options), torch::randn({width, d}, options)},
              torch::randn({batch, heads, length, d}, options), "composite attention " + where, dtype.tolerance);
        }
  }
}

// The attention kernel itself with dropout: the CUDA blocks draw the same Philox mask as the CPU tiles, so
// output, log-sum-exp and every gradient agree in double, for any head size.
TEST(CudaKernels, AttentionKernelWithDropoutMatchesTheCpu) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(48);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const int64_t B = 2, N = 3, T = 70, d = 16;
  kernels::AttentionInputs in = testing::banded_inputs(B, N, T, d, 4, 0.25, options);
  in.key_mask = ragged_mask(B, T);
  in.dropout = {0.3, 99, 5};
  const torch::Tensor dout = torch::randn({B, N, T, d}, options);
  kernels::AttentionInputs on_cuda = in;
  for (torch::Tensor* t :
       {&on_cuda.q, &on_cuda.k, &on_cuda.v, &on_cuda.query_band, &on_cuda.key_band, &on_cuda.key_mask}) {
    *t = t->to(cuda0());
  }
  const kernels::AttentionOutputs cpu = kernels::relative_attention_forward(in);
  const kernels::AttentionOutputs cuda = kernels::relative_attention_forward(on_cuda);
  EXPECT_TRUE(torch::allclose(cuda.out.cpu(), cpu.out, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(cuda.logsumexp.cpu(), cpu.logsumexp, 1e-10, 1e-10));
  const kernels::AttentionGrads cpu_grads = kernels::relative_attention_backward(dout, in, cpu);
  const kernels::AttentionGrads cuda_grads = kernels::relative_attention_backward(dout.to(cuda0()), on_cuda, cuda);
  EXPECT_TRUE(torch::allclose(cuda_grads.q.cpu(), cpu_grads.q, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(cuda_grads.k.cpu(), cpu_grads.k, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(cuda_grads.v.cpu(), cpu_grads.v, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(cuda_grads.query_band.cpu(), cpu_grads.query_band, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(cuda_grads.key_band.cpu(), cpu_grads.key_band, 1e-10, 1e-10));

  // Heads wider than any per-thread row (160), and blocks of 7 query rows (the chunked path's own entry
  // point), still the CPU kernel's numbers.
  kernels::AttentionInputs wide = in;
  wide.q = torch::randn({B, N, T, 160}, options);
  wide.k = torch::randn({B, N, T, 160}, options);
  wide.v = torch::randn({B, N, T, 160}, options);
  kernels::AttentionInputs wide_cuda = wide;
  for (torch::Tensor* t :
       {&wide_cuda.q, &wide_cuda.k, &wide_cuda.v, &wide_cuda.query_band, &wide_cuda.key_band, &wide_cuda.key_mask}) {
    *t = t->to(cuda0());
  }
  const kernels::AttentionOutputs wide_cpu = kernels::relative_attention_forward(wide);
  const kernels::AttentionOutputs wide_blocks = kernels::chunked::relative_attention_forward(wide_cuda, 7 * B * N * T);
  EXPECT_TRUE(torch::allclose(wide_blocks.out.cpu(), wide_cpu.out, 1e-10, 1e-10));
  const torch::Tensor wide_dout = torch::randn({B, N, T, 160}, options);
  const kernels::AttentionGrads wide_cpu_grads = kernels::relative_attention_backward(wide_dout, wide, wide_cpu);
  const kernels::AttentionGrads wide_block_grads = kernels::chunked::relative_attention_backward(
      wide_dout.to(cuda0()).contiguous(), wide_cuda, wide_blocks, 7 * B * N * T);
  EXPECT_TRUE(torch::allclose(wide_block_grads.q.cpu(), wide_cpu_grads.q, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(wide_block_grads.k.cpu(), wide_cpu_grads.k, 1e-10, 1e-10));
  EXPECT_TRUE(torch::allclose(wide_block_grads.key_band.cpu(), wide_cpu_grads.key_band, 1e-10, 1e-10));
}

// Composite attention in float on CUDA takes PyTorch's memory-efficient kernel on the regions beyond the radius
// (kernels/regions): its dropout masks are its own. With one-hot values the output shows the dropped
// probabilities themselves: every entry is 0 or the reference's probability / (1 - p), and with that mask the
// reference's output and autograd gradients are the path's (float, 1e-4). The same seed gives the same masks,
// another seed others, and PyTorch's own CUDA generator is left where it was.
TEST(CudaKernels, RegionAttentionDropoutIsTheReferenceWithItsMask) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(49);
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
  const int64_t B = 2, N = 2, T = 40, radius = 3, width = 2 * radius + 1;
  const double p = 0.3;
  kernels::AttentionInputs in;
  in.q = torch::randn({B, N, T, T}, options);
  in.k = torch::randn({B, N, T, T}, options);
  in.v = torch::eye(T, options).expand({B, N, T, T}).contiguous();
  in.query_band = torch::randn({B, N, T, width}, options);
  in.key_band = torch::randn({B, N, T, width}, options);
  in.key_mask = ragged_mask(B, T).to(cuda0());
  in.radius = radius;
  in.scale = 0.2;
  in.dropout = {p, 1234, 0};
  torch::manual_seed(7);
  const torch::Tensor untouched = torch::rand({8}, options);
  torch::manual_seed(7);
  const kernels::AttentionOutputs revealed = kernels::relative_attention_forward(in);
  EXPECT_TRUE(torch::equal(torch::rand({8}, options), untouched)) << "PyTorch's CUDA generator moved";
  ASSERT_TRUE(revealed.rng.defined()) << "float on CUDA takes the regions";
  EXPECT_TRUE(torch::equal(kernels::relative_attention_forward(in).out, revealed.out)) << "same seed, same masks";
  kernels::AttentionInputs reseeded = in;
  reseeded.dropout.seed = 4321;
  EXPECT_FALSE(torch::equal(kernels::relative_attention_forward(reseeded).out, revealed.out));

  kernels::AttentionInputs plain = in;
  plain.dropout.p = 0;
  at::Tensor probabilities;
  kernels::reference::relative_attention(plain, &probabilities);
  const torch::Tensor dropped = revealed.out;  // [B, N, T, T]: the dropped probabilities, row by row
  const torch::Tensor keep = dropped.gt(0);
  EXPECT_GT(keep.logical_not().logical_and(probabilities.gt(1e-6)).sum().item<int64_t>(), 0) << "nothing dropped";
  EXPECT_TRUE(torch::allclose(dropped, probabilities * keep / (1 - p), 1e-5, 1e-6));

  kernels::AttentionInputs random = in;
  random.v = torch::randn({B, N, T, T}, options);
  for (at::Tensor* t : {&random.q, &random.k, &random.v, &random.query_band, &random.key_band}) {
    *t = t->detach().requires_grad_();
  }
  plain = random;
  plain.dropout.p = 0;
  kernels::reference::relative_attention(plain, &probabilities);
  const torch::Tensor want = torch::matmul(probabilities * keep / (1 - p), random.v);
  const torch::Tensor dout = torch::randn_like(want);
  const std::vector<torch::Tensor> want_grads =
      torch::autograd::grad({want}, {random.q, random.k, random.v, random.query_band, random.key_band}, {dout});
  const kernels::AttentionOutputs got = kernels::relative_attention_forward(random);
  EXPECT_TRUE(torch::allclose(got.out, want, 1e-4, 1e-4)) << (got.out - want).abs().max().item<double>();
  const kernels::AttentionGrads grads = kernels::relative_attention_backward(dout, random, got);
  const torch::Tensor got_grads[] = {grads.q, grads.k, grads.v, grads.query_band, grads.key_band};
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(torch::allclose(got_grads[i], want_grads[i], 1e-4, 1e-4))
        << "gradient " << i << ", max diff " << (got_grads[i] - want_grads[i]).abs().max().item<double>();
  }
}

// `--cuda-attention blocks`: float on CUDA takes the blocks, whose dropout masks are the reference's, so the
// CPU kernel's output with dropout is theirs.
TEST(CudaKernels, BlocksRouteKeepsTheReferenceMasksInFloat) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(50);
  const int64_t B = 2, N = 2, T = 50, d = 16;
  kernels::AttentionInputs in = testing::banded_inputs(B, N, T, d, 4, 0.25);
  in.key_mask = ragged_mask(B, T);
  in.dropout = {0.3, 77, 0};
  kernels::AttentionInputs on_cuda = in;
  for (torch::Tensor* t :
       {&on_cuda.q, &on_cuda.k, &on_cuda.v, &on_cuda.query_band, &on_cuda.key_band, &on_cuda.key_mask}) {
    *t = t->to(cuda0());
  }
  kernels::AttentionOutputs blocks;
  {
    const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kBlocks);
    blocks = kernels::relative_attention_forward(on_cuda);
  }
  EXPECT_FALSE(blocks.rng.defined()) << "the blocks took it";
  const kernels::AttentionOutputs cpu = kernels::relative_attention_forward(in);
  EXPECT_TRUE(torch::allclose(blocks.out.cpu(), cpu.out, 1e-4, 1e-4))
      << (blocks.out.cpu() - cpu.out).abs().max().item<double>();
  EXPECT_TRUE(kernels::relative_attention_forward(on_cuda).rng.defined())
      << "the regions are the kernels' route by default (auto)";
}

// --cuda-attention auto (the default): a problem of at most 2^25 score entries takes the reference's T x T scores
// on the fused path, so with dropout its output and gradients are the reference path's (the same Philox masks),
// where the regions' masks are their own; a larger problem takes the regions.
TEST(CudaKernels, AutoRouteTakesTheReferenceScoresForSmallProblems) {
  CABERT_REQUIRE_CUDA();
  ASSERT_EQ(kernels::cuda_attention_route(), kernels::CudaAttentionRoute::kAuto);
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
  const int64_t B = 2, N = 2, T = 40, d = 16, radius = 4, width = 2 * radius + 1;
  const torch::Tensor mask = ragged_mask(B, T).to(cuda0());
  auto op = [&](const std::vector<torch::Tensor>& in) {
    return ops::composite_attention(in[0], in[1], in[2], {in[3], in[4], in[5], radius}, mask, 0.25, 0.3);
  };
  torch::manual_seed(52);
  const std::vector<torch::Tensor> inputs = {torch::randn({B, N, T, d}, options), torch::randn({B, N, T, d}, options),
                                             torch::randn({B, N, T, d}, options), torch::randn({width, d}, options),
                                             torch::randn({N, width}, options),   torch::randn({width, d}, options)};
  const torch::Tensor probe = torch::randn({B, N, T, d}, options);
  auto run = [&](KernelPath path) {
    torch::manual_seed(7);  // the call's dropout seed
    return run_on_path(path, op, inputs, probe);
  };
  const OpRun reference = run(KernelPath::kReference), automatic = run(KernelPath::kFused);
  EXPECT_TRUE(torch::allclose(automatic.out, reference.out, 1e-5, 1e-6));
  for (size_t i = 0; i < reference.grads.size(); ++i) {
    EXPECT_TRUE(torch::allclose(automatic.grads[i], reference.grads[i], 1e-5, 1e-6)) << "gradient " << i;
  }
  OpRun regions;
  {
    const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kRegions);
    regions = run(KernelPath::kFused);
  }
  EXPECT_FALSE(torch::allclose(regions.out, reference.out, 1e-3, 1e-3)) << "the regions draw their own masks";
  EXPECT_FALSE(kernels::cuda_attention_takes_scores(8, 4, 2048)) << "beyond the bound: the regions";
}

// Philox dropout: the CUDA kernel drops the same elements as the CPU kernel and scales them alike, in every
// dtype (half and bfloat16 computed in float on both), for a size that ends inside a counter block.
TEST(CudaKernels, PhiloxDropoutMatchesTheCpuBitwise) {
  CABERT_REQUIRE_CUDA();
  kernels::DropoutDraw draw;
  draw.p = 0.3;
  draw.seed = 0x0123456789ABCDEFull;
  draw.offset = 3;
  for (const torch::Dtype dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16}) {
    const torch::Tensor x = torch::randn({3, 7, 1001}).to(dtype);
    const torch::Tensor on_cpu = kernels::philox_dropout(x, draw);
    const torch::Tensor on_cuda = kernels::philox_dropout(x.to(cuda0()), draw);
    EXPECT_TRUE(torch::equal(on_cuda.cpu(), on_cpu)) << dtype;
  }
}

TEST(CudaKernels, NonContiguousInputsGiveTheContiguousResult) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(43);
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(cuda0());
  // x as a transposed [T, B, C] tensor (fairseq's TBC layout), the kernels as a slice.
  const torch::Tensor x = torch::randn({9, 3, 6}, options).transpose(0, 1);
  const torch::Tensor kernels = torch::randn({3, 9, 2, 10}, options).narrow(3, 2, 5);
  ASSERT_FALSE(x.is_contiguous());
  ASSERT_FALSE(kernels.is_contiguous());
  ops::ScopedKernelPath fused(KernelPath::kFused);
  EXPECT_TRUE(torch::allclose(ops::dynamic_conv(x, kernels, 2),
                              ops::dynamic_conv(x.contiguous(), kernels.contiguous(), 2), 1e-12, 1e-12));
}

TEST(CudaKernels, TwoRunsAreBitwiseEqual) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(44);
  const auto options = torch::TensorOptions().dtype(torch::kFloat);
  const std::vector<torch::Tensor> inputs =
      to_device({torch::randn({4, 200, 64}, options), torch::randn({4, 200, 4, 17}, options)}, cuda0());
  const torch::Tensor probe = torch::randn({4, 200, 64}, options).to(cuda0());
  Op op = [](const std::vector<torch::Tensor>& in) { return ops::dynamic_conv(in[0], in[1], 8); };
  const OpRun first = run_on_path(KernelPath::kFused, op, inputs, probe);
  const OpRun second = run_on_path(KernelPath::kFused, op, inputs, probe);
  EXPECT_TRUE(torch::equal(first.out, second.out));
  for (size_t i = 0; i < first.grads.size(); ++i) EXPECT_TRUE(torch::equal(first.grads[i], second.grads[i])) << i;
}

#ifdef CABERT_WITH_CUDA
TEST(CudaKernels, ASideStreamGivesTheSameResult) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(45);
  const auto options = torch::TensorOptions().dtype(torch::kDouble).device(cuda0());
  const torch::Tensor x = torch::randn({2, 50, 8}, options), weight = torch::randn({4, 7}, options);
  ops::ScopedKernelPath fused(KernelPath::kFused);
  const torch::Tensor on_default = ops::lightweight_conv(x, weight, 3);
  torch::Tensor on_side;
  {
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
    const c10::cuda::CUDAStreamGuard guard(side);
    on_side = ops::lightweight_conv(x, weight, 3);
    side.synchronize();
  }
  EXPECT_TRUE(torch::equal(on_default, on_side));
}

TEST(CudaKernels, ASecondDeviceComputesOnItself) {
  CABERT_REQUIRE_CUDA();
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "one CUDA device";
  torch::manual_seed(46);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor x = torch::randn({2, 30, 8}, options), kernels = torch::randn({2, 30, 2, 5}, options);
  ops::ScopedKernelPath fused(KernelPath::kFused);
  const torch::Device second(torch::kCUDA, 1);
  const c10::cuda::CUDAGuard current_is_zero(0);  // the kernels must follow the tensors, not the current device
  const torch::Tensor out = ops::dynamic_conv(x.to(second), kernels.to(second), 2);
  EXPECT_EQ(out.device(), second);
  EXPECT_TRUE(torch::allclose(out.cpu(), ops::dynamic_conv(x, kernels, 2), 1e-12, 1e-12));
}

// What a trainer does with --device cuda:1 (and each data-parallel rank with its GPU): that GPU becomes the current
// one, so contexts, streams and NCCL's communicators stop landing on GPU 0; an unindexed "cuda" keeps it.
TEST(CudaKernels, SelectingAnIndexedDeviceMakesItCurrent) {
  CABERT_REQUIRE_CUDA();
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "one CUDA device";
  const c10::cuda::CUDAGuard restored_after(0);
  EXPECT_EQ(ops::select_device("cuda:1"), torch::Device(torch::kCUDA, 1));
  EXPECT_EQ(c10::cuda::current_device(), 1);
  EXPECT_EQ(ops::select_device("cuda"), torch::Device(torch::kCUDA));
  EXPECT_EQ(c10::cuda::current_device(), 1);
  EXPECT_EQ(torch::zeros({1}, torch::Device(torch::kCUDA)).device(), torch::Device(torch::kCUDA, 1));
}
#endif

TEST(CudaKernels, Bf16AutocastStaysNearTheFloatResult) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(47);
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
  const torch::Tensor x = torch::randn({2, 64, 32}, options), proj = torch::randn({4 * 7, 32}, options) * 0.2;
  auto op = [&](const std::vector<torch::Tensor>& in) {
    torch::Tensor kernels = torch::matmul(in[0], in[1].t()).view({2, 64, 4, 7}).softmax(-1);  // bf16 under autocast
    return ops::dynamic_conv(in[0], kernels, 3);
  };
  const torch::Tensor probe = torch::randn({2, 64, 32}, options);
  const OpRun exact = run_on_path(KernelPath::kFused, op, {x, proj}, probe);
  OpRun mixed;
  {
    const ops::AutocastScope autocast(true, cuda0());  // what pretrain --amp uses
    mixed = run_on_path(KernelPath::kFused, op, {x, proj}, probe);
  }
  EXPECT_TRUE(torch::allclose(mixed.out.to(torch::kFloat), exact.out, 0.05, 0.05));
  for (size_t i = 0; i < exact.grads.size(); ++i) {
    const double scale = exact.grads[i].abs().max().item<double>();
    EXPECT_LT((mixed.grads[i].to(torch::kFloat) - exact.grads[i]).abs().max().item<double>(), 0.05 * scale) << i;
  }
}

// Composite attention under autocast: float32 inside, but the regions' PyTorch kernel takes bfloat16 operands
// (tensor cores): within bfloat16's tolerance of the float result, and not equal to it.
TEST(CudaKernels, Bf16AutocastCompositeAttentionStaysNearTheFloatResult) {
  CABERT_REQUIRE_CUDA();
  const kernels::ScopedCudaAttentionRoute route(kernels::CudaAttentionRoute::kRegions);
  torch::manual_seed(51);
  const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
  const int64_t B = 2, N = 4, T = 300, d = 32, radius = 8, width = 2 * radius + 1;
  const torch::Tensor mask = ragged_mask(B, T).to(cuda0());
  auto op = [&](const std::vector<torch::Tensor>& in) {
    return ops::composite_attention(in[0], in[1], in[2], {in[3], in[4], in[5], radius}, mask, 0.2, 0.0);
  };
  const std::vector<torch::Tensor> inputs = {
      torch::randn({B, N, T, d}, options),     torch::randn({B, N, T, d}, options),
      torch::randn({B, N, T, d}, options),     torch::randn({width, d}, options) * 0.3,
      torch::randn({N, width}, options) * 0.3, torch::randn({width, d}, options) * 0.3};
  const torch::Tensor probe = torch::randn({B, N, T, d}, options);
  const OpRun exact = run_on_path(KernelPath::kFused, op, inputs, probe);
  OpRun mixed;
  {
    const ops::AutocastScope autocast(true, cuda0());
    mixed = run_on_path(KernelPath::kFused, op, inputs, probe);
  }
  const double out_error = (mixed.out.to(torch::kFloat) - exact.out).abs().max().item<double>();
  EXPECT_LT(out_error, 0.03 * exact.out.abs().max().item<double>());
  EXPECT_GT(out_error, 0.0) << "bfloat16 operands give other roundings";
  for (size_t i = 0; i < exact.grads.size(); ++i) {
    const double scale = exact.grads[i].abs().max().item<double>();
    EXPECT_LT((mixed.grads[i].to(torch::kFloat) - exact.grads[i]).abs().max().item<double>(), 0.03 * scale) << i;
  }
}

TEST(CudaKernels, LargeShapes) {
  CABERT_REQUIRE_CUDA();
  torch::manual_seed(48);
  ops::ScopedKernelPath fused(KernelPath::kFused);
  {  // B=256 T=512 C=768: more elements than one grid covers at once
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
    const torch::Tensor x = torch::randn({256, 512, 768}, options), weight = torch::randn({12, 9}, options).softmax(-1);
    const torch::Tensor fused_out = ops::lightweight_conv(x, weight, 4);
    ops::ScopedKernelPath reference(KernelPath::kReference);
    EXPECT_TRUE(torch::allclose(fused_out, ops::lightweight_conv(x, weight, 4), 1e-4, 1e-4));
  }
  {  // a relpos tensor past 2^31 elements: 64-bit indexing (B=2 H=16 T=8200: 2.15e9 floats, 8.6 GB)
    const size_t free_needed = size_t{20} << 30;
    const auto devices = kernels::cuda_devices();
    if (devices.empty() || static_cast<size_t>(devices.front().memory_bytes) < free_needed) {
      GTEST_SKIP() << "less than 20 GiB on cuda:0";
    }
    const auto options = torch::TensorOptions().dtype(torch::kFloat).device(cuda0());
    const torch::Tensor q = torch::randn({2, 16, 8200, 4}, options), w = torch::randn({5, 4}, options);
    const torch::Tensor out = ops::relative_position_scores(q, w, torch::Tensor(), 2, 1.0);
    ASSERT_GT(out.numel(), int64_t{1} << 31);
    // The last row of the last head: far from the first 2^31 elements.
    const torch::Tensor row = out[1][15][8199].cpu();
    const torch::Tensor expected =
        torch::matmul(q[1][15][8199].cpu(), w.cpu().t()).index({torch::indexing::Slice(0, 3)});  // j - i in [-2, 0]
    EXPECT_TRUE(torch::allclose(row.index({torch::indexing::Slice(8197, 8200)}), expected, 1e-4, 1e-4));
    EXPECT_NEAR(row[0].item<double>(), expected[0].item<double>(), 1e-4);  // beyond the radius: the edge value
  }
}

// `pretrain --device cuda --steps 2`: the fused and the reference kernels give the same losses, with and
// without --amp. In float on CUDA, attention takes PyTorch's fused kernels (ConvBERT's plain heads SDPA, the
// composite attention its memory-efficient kernel on the regions beyond the radius), whose attention-dropout
// masks are not cabert's Philox draws of the reference: the attention presets run without attention dropout
// (their other dropouts stay; each call draws the seed the reference's draws, so their masks are the same on
// both paths).
TEST(CudaKernels, PretrainOnCudaGivesTheSameLossesWithBothKernelPaths) {
  CABERT_REQUIRE_CUDA();
  const std::string dir = testing::temp_dir();
  const std::string binary = CABERT_BINARY, sample = std::string(CABERT_SOURCE_DIR) + "/recipes/quickstart/data";
  auto run = [&](const std::string& command) { ASSERT_TRUE(testing::runs(command)); };
  run(binary + " -q tokenize train -i " + sample + "/gutenberg/11-0.txt --input-format gutenberg --vocab-size 300 " +
      "--model-prefix " + dir + "/tok");
  run(binary + " -q build-corpus -m " + dir + "/tok.model -i " + sample + "/gutenberg/11-0.txt --input-format " +
      "gutenberg --max-length 32 -o " + dir + "/corpus");
  const std::pair<const char*, const char*> presets[] = {{"bert-tiny-composite", " --set attention_dropout=0"},
                                                         {"convbert-tiny", " --set attention_dropout=0"},
                                                         {"dynamicconv-tiny", ""}};
  for (const auto& [preset, settings] : presets) {
    for (const char* amp : {"", " --amp"}) {
      std::vector<std::pair<int64_t, double>> losses[2];
      int index = 0;
      for (const char* kernels : {"fused", "reference"}) {
        const std::string model_dir = str(dir, "/", preset, kernels, amp[0] ? "-amp" : "");
        run(str(binary, " --cuda-attention regions pretrain --preset ", preset, " --corpus ", dir,
                "/corpus --model-dir ", model_dir, " --steps 2 --batch-size 4 --device cuda --kernels ", kernels, amp,
                settings));
        losses[index++] = testing::train_losses(model_dir + "/metrics.cabert");
      }
      ASSERT_FALSE(losses[0].empty()) << preset << amp;
      for (size_t i = 0; i < losses[0].size() && i < losses[1].size(); ++i) {
        EXPECT_NEAR(losses[0][i].second, losses[1][i].second, amp[0] ? 2e-2 : 1e-4) << preset << amp;
      }
    }
  }
}

}  // namespace
}  // namespace cabert
