// The CUDA kernels of kernels/cuda/*_kernels.cuh, their own source and host code, run on the CPU through
// tests/kernels/cuda_emulator.h (fibers for threads, real barriers and warp shuffles) against the fused CPU kernels
// (whose agreement with the reference the other kernel tests establish): the conv tiles' thread mapping, shared
// memory and barriers, which conv_math_test.cc (the tiles' maths, replayed) cannot see, and the dropout kernel's
// grid-stride walk over Philox blocks (bitwise), are tested without a GPU. Also the emulator itself: a missing
// barrier gives a wrong result, a barrier some threads skip fails the launch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/conv_cpu.h"
#include "kernels/cpu/dropout_cpu.h"
#include "kernels/dropout_kernels.h"
#include "tests/kernels/conv_test_util.h"
#include "tests/kernels/cuda_emulator.h"
#include "tests/kernels/emulated_launchers.h"

// After the emulator, which defines the CUDA keywords and built-ins that they use.
#include "kernels/cuda/conv_cuda_kernels.cuh"
#include "kernels/cuda/dropout_cuda_kernels.cuh"

namespace cabert {
namespace {

using testing::ConvCase;
namespace emulated = kernels::cuda::impl;

// Every test once per grid of tests/kernels/emulated_launchers.h.
template <typename Launcher>
class CudaKernelsEmulated : public ::testing::Test {};
TYPED_TEST_SUITE(CudaKernelsEmulated, testing::EmulatedLaunchers, testing::EmulatedLauncherNames);

constexpr int64_t kChannels = 40;  // one whole tile of 32 channels and a partial one

// Shapes that take every path of the tiles: one position, T past one tile of 32 rows (and not a multiple of it),
// K past one chunk of 32 taps, K > T, centred, causal and zero padding, masks, B = 1 and 3.
std::vector<ConvCase> emulated_cases() {
  return {{1, 1, 1, 0, false},    {3, 5, 7, 3, true},   {2, 70, 4, 3, true},
          {2, 70, 33, 16, false}, {1, 40, 40, 0, true}, {3, 33, 17, 8, true}};
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const double error = (actual - expected).abs().max().item<double>();
  EXPECT_LE(error, tolerance) << what;
}

double tolerance_of(torch::ScalarType dtype) { return dtype == torch::kDouble ? 1e-12 : 2e-5; }

torch::Tensor mask_of(const ConvCase& c) {
  return c.masked ? testing::ragged_mask(c.batch, c.length) : torch::Tensor();
}

TYPED_TEST(CudaKernelsEmulated, GroupedConvMatchesTheCpuKernels) {
  torch::manual_seed(11);
  for (torch::ScalarType dtype : {torch::kDouble, torch::kFloat}) {
    const auto options = torch::TensorOptions().dtype(dtype);
    for (const ConvCase& c : emulated_cases()) {
      for (int64_t groups : {kChannels, int64_t{4}}) {  // depthwise, lightweight
        const std::string where = c.name() + " G=" + std::to_string(groups) + " " + c10::toString(dtype);
        const torch::Tensor x = torch::randn({c.batch, c.length, kChannels}, options);
        const torch::Tensor weight = torch::randn({groups, c.kernel_size}, options);
        const torch::Tensor bias = groups == kChannels ? torch::randn({kChannels}, options) : torch::Tensor();
        const torch::Tensor grad = torch::randn_like(x);
        const torch::Tensor mask = mask_of(c);
        expect_close(emulated::grouped_conv_forward<TypeParam>(x, weight, bias, c.pad, mask),
                     kernels::cpu::grouped_conv_forward(x, weight, bias, c.pad, mask), tolerance_of(dtype),
                     "forward " + where);
        torch::Tensor grad_x, grad_weight, cpu_grad_x, cpu_grad_weight;
        emulated::grouped_conv_backward<TypeParam>(grad, x, weight, c.pad, mask, grad_x, grad_weight);
        kernels::cpu::grouped_conv_backward(grad, x, weight, c.pad, mask, cpu_grad_x, cpu_grad_weight);
        expect_close(grad_x, cpu_grad_x, tolerance_of(dtype), "input gradient " + where);
        expect_close(grad_weight, cpu_grad_weight, tolerance_of(dtype) * c.length, "weight gradient " + where);
      }
    }
  }
}

TYPED_TEST(CudaKernelsEmulated, DynamicConvMatchesTheCpuKernels) {
  torch::manual_seed(12);
  for (torch::ScalarType dtype : {torch::kDouble, torch::kFloat}) {
    const auto options = torch::TensorOptions().dtype(dtype);
    for (const ConvCase& c : emulated_cases()) {
      for (int64_t heads : {int64_t{1}, int64_t{4}}) {  // a head of 40 channels (two chunks), heads of 10
        const std::string where = c.name() + " H=" + std::to_string(heads) + " " + c10::toString(dtype);
        const torch::Tensor x = torch::randn({c.batch, c.length, kChannels}, options);
        const torch::Tensor taps = torch::randn({c.batch, c.length, heads, c.kernel_size}, options);
        const torch::Tensor grad = torch::randn_like(x);
        const torch::Tensor mask = mask_of(c);
        expect_close(emulated::dynamic_conv_forward<TypeParam>(x, taps, c.pad, mask),
                     kernels::cpu::dynamic_conv_forward(x, taps, c.pad, mask), tolerance_of(dtype), "forward " + where);
        torch::Tensor grad_x, grad_kernels, cpu_grad_x, cpu_grad_kernels;
        emulated::dynamic_conv_backward<TypeParam>(grad, x, taps, c.pad, mask, grad_x, grad_kernels);
        kernels::cpu::dynamic_conv_backward(grad, x, taps, c.pad, mask, cpu_grad_x, cpu_grad_kernels);
        expect_close(grad_x, cpu_grad_x, tolerance_of(dtype), "input gradient " + where);
        expect_close(grad_kernels, cpu_grad_kernels, tolerance_of(dtype), "kernel gradient " + where);
      }
    }
  }
}

// The expansion (a thread per score) and the reduction (a warp per score row: its tails summed by 32 lanes and
// warp shuffles), rows longer than a warp, radius 0, inside and past T, with the band or beta alone.
TYPED_TEST(CudaKernelsEmulated, RelativePositionKernelsMatchTheCpuKernels) {
  torch::manual_seed(13);
  const int64_t batch = 2, heads = 3, length = 45;
  for (int64_t radius : {0, 3, 50}) {
    const int64_t width = 2 * radius + 1;
    const torch::Tensor band = torch::randn({batch, heads, length, width}, torch::kDouble);
    const torch::Tensor beta = torch::randn({heads, width}, torch::kDouble);
    for (int parts = 0; parts < 3; ++parts) {
      const torch::Tensor b = parts == 1 ? torch::Tensor() : band, w = parts == 2 ? torch::Tensor() : beta;
      const std::string where = "radius " + std::to_string(radius) + " parts " + std::to_string(parts);
      expect_close(emulated::relpos_expand<TypeParam>(b, w, batch, heads, length, radius),
                   kernels::cpu::relpos_expand(b, w, batch, heads, length, radius), 0, "expand " + where);
    }
    const torch::Tensor grad = torch::randn({batch, heads, length, length}, torch::kDouble);
    expect_close(emulated::relpos_reduce<TypeParam>(grad, radius), kernels::cpu::relpos_reduce(grad, radius), 1e-12,
                 "reduce radius " + std::to_string(radius));
  }
}

// Bitwise the CPU kernel's result, in every dtype: whole tensors, a block of queries of [3, 37, 37] probabilities
// (runs of 407 indices 1,369 apart, starting inside a counter block), 4,101 runs of one element 3 apart.
TYPED_TEST(CudaKernelsEmulated, PhiloxDropoutMatchesTheCpuKernelBitwise) {
  torch::manual_seed(14);
  const kernels::DropoutDraw draw{0.4, 0x0123456789abcdefull, 3};
  struct Case {
    std::vector<int64_t> sizes;
    kernels::DrawIndex index;
  };
  const std::vector<Case> cases = {{{5}, {}}, {{3, 37, 37}, {}}, {{3, 11, 37}, {5 * 37, 37 * 37}}, {{4101, 1}, {2, 3}}};
  for (torch::ScalarType dtype : {torch::kDouble, torch::kFloat, torch::kHalf, torch::kBFloat16}) {
    for (const Case& c : cases) {
      const torch::Tensor x = torch::randn(c.sizes, torch::kDouble).to(dtype);
      const kernels::DrawRuns runs = kernels::draw_runs(x.sizes(), c.index);
      EXPECT_TRUE(
          torch::equal(emulated::philox_dropout<TypeParam>(x, draw, runs), kernels::cpu::philox_dropout(x, draw, runs)))
          << x.sizes() << " first " << c.index.first << " " << c10::toString(dtype);
    }
  }
}

// ---- the emulator itself ----

namespace emulator = testing::cuda_emulator;

// Each block reverses its slice of `in` through shared memory, with or without the barrier between the writes
// and the reads.
template <bool kWithBarrier>
__global__ void reverse_in_blocks(const int* in, int* out) {
  __shared__ int slice[64];
  const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  slice[t] = in[base + t];
  if (kWithBarrier) __syncthreads();
  out[base + t] = slice[blockDim.x - 1 - t];
}

std::vector<int> reversed_by(void (*kernel)(const int*, int*)) {
  std::vector<int> in(128), out(128, -1);
  for (int i = 0; i < 128; ++i) in[i] = i + 1;
  emulator::launch(2, 64, kernel, in.data(), out.data());
  return out;
}

TEST(CudaEmulator, AMissingBarrierGivesAWrongResult) {
  std::vector<int> expected(128);
  for (int i = 0; i < 128; ++i) expected[i] = (i / 64) * 64 + 63 - i % 64 + 1;
  EXPECT_EQ(reversed_by(reverse_in_blocks<true>), expected);
  EXPECT_NE(reversed_by(reverse_in_blocks<false>), expected);
}

__global__ void barrier_in_a_branch(int* out) {
  if (threadIdx.x < 3) __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(CudaEmulator, ABarrierSomeThreadsSkipFailsTheLaunch) {
  std::vector<int> out(40);
  try {
    emulator::launch(1, 40, barrier_in_a_branch, out.data());
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("block 0 of 1: deadlock: threads 0, 1, 2 wait at __syncthreads() at "), std::string::npos)
        << message;
    EXPECT_NE(message.find("cuda_kernels_emulated_test.cc:"), std::string::npos) << message;
    EXPECT_NE(message.find("threads 3, 4, 5, 6, 7, 8, 9, 10, ... (37 threads) have ended"), std::string::npos)
        << message;
  }
}

// Lane sums by butterfly shuffles, as conv_cuda_kernels.cuh's warp_sum: every lane gets its warp's sum.
__global__ void warp_sums(const double* in, double* out) {
  double value = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  out[threadIdx.x] = value;
}

TEST(CudaEmulator, WarpShufflesExchangeWithinEachWarp) {
  std::vector<double> in(64), out(64);
  for (int i = 0; i < 64; ++i) in[i] = i;
  emulator::launch(1, 64, warp_sums, in.data(), out.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], i < 32 ? 496.0 : 1520.0) << "lane " << i;      // 0+..+31, 32+..+63
  EXPECT_THROW(emulator::launch(1, 48, warp_sums, in.data(), out.data()), std::runtime_error);  // a partial warp
}

TEST(CudaEmulator, BuiltInsOutsideALaunchThrow) { EXPECT_THROW(threadIdx, std::logic_error); }

}  // namespace
}  // namespace cabert
