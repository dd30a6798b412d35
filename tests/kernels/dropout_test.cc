// Philox dropout (kernels/dropout_kernels.h, lib/ops/dropout_ops.h): the CPU kernel's lanes against the
// one-block mask of the reference, element for element, over sizes that end inside a counter block and inside
// a thread's chunk; every dtype; strides; the kept fraction; the op's gradient, its agreement with the
// reference path, reproducibility from the generator, the models' module; argument errors.
#include <gtest/gtest.h>

#include "kernels/dropout_kernels.h"
#include "lib/core/errors.h"
#include "lib/models/layers.h"
#include "lib/ops/dropout_ops.h"
#include "lib/ops/kernel_path.h"

namespace cabert {
namespace {

using ops::KernelPath;
using ops::ScopedKernelPath;

kernels::DropoutDraw draw_of(double p, uint64_t seed, uint64_t offset = 0) {
  kernels::DropoutDraw draw;
  draw.p = p;
  draw.seed = seed;
  draw.offset = offset;
  return draw;
}

// x * keep / (1 - p), with the factor rounded to x's computation type as ATen rounds a scalar.
torch::Tensor masked_by_hand(const torch::Tensor& x, const kernels::DropoutDraw& draw) {
  const torch::Tensor keep = kernels::dropout_keep(x.sizes(), draw);
  const torch::Dtype compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  return (x.to(compute) * keep.to(compute) * (1 / (1 - draw.p))).to(x.scalar_type());
}

TEST(PhiloxDropout, KernelAppliesTheOneBlockMaskAndScales) {
  // 4,097 elements: one element past the first chunk; 3 x 5 x 677 = 10,155: ends inside a block and a chunk.
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{1}, {3}, {4097}, {3, 5, 677}}) {
    for (const double p : {0.1, 0.5, 0.9}) {
      for (const torch::Dtype dtype : {torch::kFloat, torch::kDouble}) {
        const torch::Tensor x = torch::randn(sizes, torch::TensorOptions().dtype(dtype));
        const auto draw = draw_of(p, 0x9E3779B97F4A7C15ull, 7);
        const torch::Tensor y = kernels::philox_dropout(x, draw);
        EXPECT_TRUE(torch::equal(y, masked_by_hand(x, draw))) << x.numel() << " elements, p=" << p << " " << dtype;
      }
    }
  }
}

TEST(PhiloxDropout, HalfAndBfloat16ComputeInFloat) {
  const auto draw = draw_of(0.25, 42);
  for (const torch::Dtype dtype : {torch::kHalf, torch::kBFloat16}) {
    const torch::Tensor x = torch::randn({7, 333}).to(dtype);
    const torch::Tensor y = kernels::philox_dropout(x, draw);
    EXPECT_EQ(y.scalar_type(), dtype);
    EXPECT_TRUE(torch::equal(y, masked_by_hand(x, draw))) << dtype;
  }
}

TEST(PhiloxDropout, MaskFollowsTheLogicalIndexWhateverTheStrides) {
  const torch::Tensor x = torch::randn({40, 30}).t();  // [30, 40], column-major storage
  const auto draw = draw_of(0.3, 5);
  const torch::Tensor y = kernels::philox_dropout(x, draw);
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_TRUE(torch::equal(y, kernels::philox_dropout(x.contiguous(), draw)));
}

TEST(PhiloxDropout, KeepsOneMinusPAndDependsOnSeedAndOffset) {
  const torch::Tensor ones = torch::ones({200, 1000});
  const auto draw = draw_of(0.3, 1234, 0);
  const torch::Tensor y = kernels::philox_dropout(ones, draw);
  const double kept = y.ne(0).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.7, 0.005);  // 200,000 draws: standard error 0.001
  // Kept elements carry exactly 1 / (1 - p) (rounded to float), dropped ones exactly 0.
  EXPECT_TRUE(torch::equal(y.masked_select(y.ne(0)), torch::full({y.ne(0).sum().item<int64_t>()}, 1 / 0.7)));
  EXPECT_FALSE(torch::equal(y, kernels::philox_dropout(ones, draw_of(0.3, 1235, 0))));
  EXPECT_FALSE(torch::equal(y, kernels::philox_dropout(ones, draw_of(0.3, 1234, 1))));
  EXPECT_TRUE(torch::equal(y, kernels::philox_dropout(ones, draw)));
}

TEST(PhiloxDropout, GradientIsTheSameMaskAndBothPathsAgree) {
  const torch::Tensor x0 = torch::randn({4, 9, 33}, torch::TensorOptions().dtype(torch::kDouble));
  const torch::Tensor w = torch::randn_like(x0);
  std::vector<torch::Tensor> outputs, grads;
  for (const KernelPath path : {KernelPath::kFused, KernelPath::kReference}) {
    ScopedKernelPath scoped(path);
    torch::manual_seed(2024);
    const torch::Tensor x = x0.clone().requires_grad_(true);
    const torch::Tensor y = ops::dropout(x, 0.4, /*training=*/true);
    (y * w).sum().backward();
    outputs.push_back(y.detach());
    grads.push_back(x.grad());
  }
  // d(sum(w y))/dx = w keep / (1 - p): where y kept x, the gradient is w / 0.6; elsewhere 0.
  const torch::Tensor kept = outputs[0].ne(0);
  EXPECT_TRUE(torch::allclose(grads[0], torch::where(kept, w / 0.6, torch::zeros_like(w)), 1e-15, 0));
  EXPECT_TRUE(torch::allclose(outputs[0], torch::where(kept, x0 / 0.6, torch::zeros_like(x0)), 1e-15, 0));
  EXPECT_TRUE(torch::equal(outputs[0], outputs[1]));
  EXPECT_TRUE(torch::equal(grads[0], grads[1]));
}

TEST(PhiloxDropout, DrawsFromTheDefaultGenerator) {
  const torch::Tensor x = torch::randn({1000});
  torch::manual_seed(7);
  const torch::Tensor first = ops::dropout(x, 0.5, true), second = ops::dropout(x, 0.5, true);
  EXPECT_FALSE(torch::equal(first, second));  // one seed per call
  torch::manual_seed(7);
  EXPECT_TRUE(torch::equal(first, ops::dropout(x, 0.5, true)));
}

TEST(PhiloxDropout, IdentityOutsideTrainingOrWithoutProbability) {
  const torch::Tensor x = torch::randn({3, 4});
  EXPECT_TRUE(ops::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(ops::dropout(x, 0.0, /*training=*/true).is_same(x));
  models::Dropout module(0.5);
  module->eval();
  EXPECT_TRUE(module(x).is_same(x));
  module->train();
  EXPECT_NEAR(module(torch::ones({4000})).eq(0).to(torch::kDouble).mean().item<double>(), 0.5, 0.04);
}

// A block of a larger tensor (DrawIndex) draws that tensor's mask for its elements: rows 5 .. 16 of every
// [37, 37] matrix of a [3, 37, 37] tensor (runs of 407 indices 1,369 apart, starting inside a counter block),
// the kernel against the slice of the whole tensor's result, and the one-block mask against the slice of its
// own; a block that is the whole tensor (stride = row length) draws as the default.
TEST(PhiloxDropout, BlocksOfALargerTensorDrawItsMask) {
  const int64_t T = 37, i0 = 5, rows = 11;
  const auto draw = draw_of(0.4, 0x0123456789abcdefull, 3);
  const torch::Tensor whole = torch::randn({3, T, T}, torch::kDouble);
  const torch::Tensor block = whole.narrow(1, i0, rows).contiguous();
  const kernels::DrawIndex index{static_cast<uint64_t>(i0 * T), static_cast<uint64_t>(T * T)};
  EXPECT_TRUE(torch::equal(kernels::philox_dropout(block, draw, index),
                           kernels::philox_dropout(whole, draw).narrow(1, i0, rows)));
  EXPECT_TRUE(torch::equal(kernels::dropout_keep(block.sizes(), draw, index),
                           kernels::dropout_keep(whole.sizes(), draw).narrow(1, i0, rows)));
  // 4,101 runs of one element 3 apart from index 2: many short runs, most starting inside a counter block.
  const torch::Tensor flat = torch::randn({2 + 3 * 4101});
  auto every_third = [](const torch::Tensor& t) {
    return t.narrow(0, 2, 3 * 4100 + 1).slice(0, 0, c10::nullopt, 3).reshape({4101, 1});
  };
  EXPECT_TRUE(torch::equal(kernels::philox_dropout(every_third(flat), draw, {2, 3}),
                           every_third(kernels::philox_dropout(flat, draw))));
  EXPECT_TRUE(torch::equal(kernels::philox_dropout(whole, draw, {0, static_cast<uint64_t>(T * T)}),
                           kernels::philox_dropout(whole, draw)));
}

TEST(PhiloxDropout, RejectsBadArguments) {
  auto message = [](const std::function<void()>& run) {
    try {
      run();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const torch::Tensor x = torch::randn({3});
  EXPECT_EQ(message([&] { ops::dropout(x, 1.0, true); }), "dropout: expected a probability in [0, 1), got 1");
  EXPECT_EQ(message([&] { ops::dropout(x, -0.1, true); }), "dropout: expected a probability in [0, 1), got -0.1");
  EXPECT_EQ(message([&] { kernels::philox_dropout(torch::ones({3}, torch::kLong), draw_of(0.5, 1)); }),
            "philox_dropout: expected a float, double, half or bfloat16 tensor, got Long");
  EXPECT_EQ(message([&] { kernels::philox_dropout(x, draw_of(1.5, 1)); }),
            "philox_dropout: expected a dropout probability in [0, 1), got 1.5");
  EXPECT_EQ(message([&] {
              kernels::philox_dropout(torch::ones({2, 3, 4}), draw_of(0.5, 1), {0, 11});
            }),
            "philox_dropout: expected a row stride of at least the row length 12, got 11");
}

}  // namespace
}  // namespace cabert
