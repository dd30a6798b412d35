// Sinusoidal positions: hand-computed values, the formula written out as loops, fairseq's numbering and
// padding, odd widths.
#include <gtest/gtest.h>

#include <cmath>

#include "lib/core/errors.h"
#include "lib/models/sinusoidal_positions.h"

namespace cabert::models {
namespace {

TEST(SinusoidalPositions, HandComputedWidthFour) {
  // d = 4: half = 2, w = [1, exp(-log(10000))] = [1, 1e-4]; enc(3) = [sin 3, sin 3e-4, cos 3, cos 3e-4].
  torch::Tensor enc = sinusoidal_encoding(torch::tensor({3}, torch::kInt64), 4, torch::kDouble);
  const double expected[4] = {std::sin(3.0), std::sin(3e-4), std::cos(3.0), std::cos(3e-4)};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(enc[0][i].item<double>(), expected[i], 1e-15) << i;
}

TEST(SinusoidalPositions, MatchesTheFormulaAsLoopsIncludingOddWidths) {
  for (int64_t dim : {6, 7, 512}) {
    torch::Tensor positions = torch::tensor({0, 1, 2, 17, 1023}, torch::kInt64);
    torch::Tensor enc = sinusoidal_encoding(positions, dim, torch::kDouble);
    ASSERT_EQ(enc.size(1), dim);
    const int64_t half = dim / 2;
    for (int64_t r = 0; r < positions.size(0); ++r) {
      const double p = static_cast<double>(positions[r].item<int64_t>());
      for (int64_t i = 0; i < half; ++i) {
        const double w = std::exp(-static_cast<double>(i) * std::log(10000.0) / static_cast<double>(half - 1));
        EXPECT_NEAR(enc[r][i].item<double>(), std::sin(p * w), 1e-12);
        EXPECT_NEAR(enc[r][half + i].item<double>(), std::cos(p * w), 1e-12);
      }
      if (dim % 2 == 1) {
        EXPECT_EQ(enc[r][dim - 1].item<double>(), 0.0);
      }
    }
  }
}

TEST(SinusoidalPositions, RealTokensNumberedFromTheFirstPositionPaddingZero) {
  torch::Tensor mask = torch::tensor({{true, true, true}, {true, false, false}});
  torch::Tensor cabert = sinusoidal_positions(mask, 8, torch::kDouble);      // [PAD] = 0: 1, 2, 3
  torch::Tensor fairseq = sinusoidal_positions(mask, 8, torch::kDouble, 2);  // fairseq's [PAD] = 1: 2, 3, 4
  torch::Tensor table = sinusoidal_encoding(torch::arange(6), 8, torch::kDouble);
  EXPECT_TRUE(torch::equal(cabert[0], table.narrow(0, 1, 3)));
  EXPECT_TRUE(torch::equal(fairseq[0], table.narrow(0, 2, 3)));
  EXPECT_TRUE(torch::equal(cabert[1][0], table[1]));
  EXPECT_TRUE(torch::equal(cabert[1].narrow(0, 1, 2), torch::zeros({2, 8}, torch::kDouble)));
}

TEST(SinusoidalPositions, RefusesWidthsTooSmallForTheFormula) {
  try {
    sinusoidal_encoding(torch::tensor({1}, torch::kInt64), 3, torch::kFloat);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()), "sinusoidal positions: expected a width of at least 4, got 3");
  }
}

}  // namespace
}  // namespace cabert::models
