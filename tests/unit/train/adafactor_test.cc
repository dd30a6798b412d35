// Adafactor against its first steps by hand (a vector, a matrix's factored estimate), a checkpoint round trip, and
// (AdafactorParity) against transformers' own Adafactor: tests/python/adafactor_reference.py writes its steps to
// $CABERT_ADAFACTOR_REFERENCE (tests/cli/adafactor_parity_test.sh); skipped when the variable is unset.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "lib/core/errors.h"
#include "lib/io/safetensors_torch.h"
#include "lib/train/adafactor.h"

namespace cabert::train {
namespace {

// Step 1 has beta2 = 1 - 1^-0.8 = 0: the second moment is the squared gradient (plus 1e-30), so a vector's
// update is sign(g) (RMS 1, not clipped) times lr x max(1e-3, RMS(p)).
TEST(Adafactor, FirstStepOfAVectorIsTheSignTimesTheParameterScale) {
  torch::Tensor p = torch::tensor({0.5, -2.0, 1.0}, torch::kDouble).requires_grad_(true);
  AdafactorOptions options;
  options.lr = 0.1;
  Adafactor adafactor({{"p", p}}, {}, options);
  const double scale = std::sqrt((0.25 + 4.0 + 1.0) / 3);
  p.mutable_grad() = torch::tensor({3.0, -0.5, 2.0}, torch::kDouble);
  adafactor.step();
  EXPECT_NEAR(p[0].item<double>(), 0.5 - 0.1 * scale, 1e-12);
  EXPECT_NEAR(p[1].item<double>(), -2.0 + 0.1 * scale, 1e-12);
  EXPECT_NEAR(p[2].item<double>(), 1.0 - 0.1 * scale, 1e-12);
}

// A matrix's second moment is estimated from its row and column means: V_ij = R_i C_j / mean(R), the update
// g_ij / sqrt(V_ij), scaled down to RMS clip_threshold when above it. Two steps by hand, the second with
// beta2 = 1 - 2^-0.8.
TEST(Adafactor, MatricesUseTheFactoredEstimate) {
  const double g1[2][3] = {{1, -2, 0.5}, {3, 1, -1}}, g2[2][3] = {{-0.5, 1, 2}, {1, -4, 0.25}};
  torch::Tensor p = torch::ones({2, 3}, torch::kDouble).requires_grad_(true);
  AdafactorOptions options;
  options.lr = 0.01, options.scale_parameter = false, options.clip_threshold = 0.8;
  Adafactor adafactor({{"p", p}}, {}, options);
  double expected[2][3] = {{1, 1, 1}, {1, 1, 1}}, row[2] = {0, 0}, column[3] = {0, 0, 0};
  for (int t = 1; t <= 2; ++t) {
    const auto& g = t == 1 ? g1 : g2;
    const double beta2 = 1 - std::pow(t, -0.8);
    for (int i = 0; i < 2; ++i) {
      double mean = 0;
      for (int j = 0; j < 3; ++j) mean += (g[i][j] * g[i][j] + 1e-30) / 3;
      row[i] = beta2 * row[i] + (1 - beta2) * mean;
    }
    for (int j = 0; j < 3; ++j) {
      double mean = 0;
      for (int i = 0; i < 2; ++i) mean += (g[i][j] * g[i][j] + 1e-30) / 2;
      column[j] = beta2 * column[j] + (1 - beta2) * mean;
    }
    double u[2][3], square_sum = 0;
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        u[i][j] = g[i][j] / std::sqrt(row[i] * column[j] / ((row[0] + row[1]) / 2));
        square_sum += u[i][j] * u[i][j];
      }
    }
    const double clip = std::max(1.0, std::sqrt(square_sum / 6) / 0.8);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) expected[i][j] -= 0.01 * u[i][j] / clip;
    }
    adafactor.zero_grad();
    p.mutable_grad() = torch::tensor({g[0][0], g[0][1], g[0][2], g[1][0], g[1][1], g[1][2]}, torch::kDouble)
                           .view({2, 3});
    adafactor.step();
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(p[i][j].item<double>(), expected[i][j], 1e-12) << t << i << j;
    }
  }
  // Memory: 2 + 3 numbers of second moment for 6 parameters.
  const NamedTensors state = adafactor.state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[1].first, "exp_avg_sq_row/p");
  EXPECT_EQ(state[1].second.sizes(), torch::IntArrayRef({2}));
  EXPECT_EQ(state[2].first, "exp_avg_sq_col/p");
  EXPECT_EQ(state[2].second.sizes(), torch::IntArrayRef({3}));
}

// Stopped after two steps and restored into a fresh optimizer, the run goes on exactly as one that never stopped;
// AdamW's state is refused by the first tensor Adafactor needs.
TEST(Adafactor, StateRoundTripsThroughACheckpoint) {
  auto make = [](torch::Tensor& w, torch::Tensor& b) {
    w = torch::arange(6, torch::kDouble).view({3, 2}).div(4).requires_grad_(true);
    b = torch::tensor({0.1, -0.2}, torch::kDouble).requires_grad_(true);
    AdafactorOptions options;
    options.beta1 = 0.9, options.weight_decay = 0.1;
    return std::make_unique<Adafactor>(NamedTensors{{"w", w}, {"bias", b}}, std::vector<std::string>{"bias"},
                                       options);
  };
  auto train = [](Adafactor& optimizer, torch::Tensor& w, torch::Tensor& b, int from, int to) {
    for (int t = from; t < to; ++t) {
      optimizer.zero_grad();
      ((w * w).sum() * (t + 1) + (b * w.sum(0)).sum()).backward();
      optimizer.step();
    }
  };
  torch::Tensor w1, b1, w2, b2;
  auto straight = make(w1, b1);
  train(*straight, w1, b1, 0, 4);
  auto first = make(w2, b2);
  train(*first, w2, b2, 0, 2);
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : first->state()) saved[name] = tensor.clone();
  torch::Tensor w3, b3;
  auto resumed = make(w3, b3);
  {
    torch::NoGradGuard no_grad;
    w3.copy_(w2), b3.copy_(b2);
  }
  resumed->load_state(saved, "last.cabert");
  EXPECT_EQ(resumed->steps(), 2);
  train(*resumed, w3, b3, 2, 4);
  EXPECT_TRUE(torch::equal(w3, w1));
  EXPECT_TRUE(torch::equal(b3, b1));

  std::map<std::string, torch::Tensor> adam_state = {{"step", torch::tensor(int64_t{2})},
                                                     {"exp_avg/w", torch::zeros({3, 2})},
                                                     {"exp_avg_sq/w", torch::zeros({3, 2})}};
  try {
    resumed->load_state(adam_state, "adamw.cabert");
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "adamw.cabert: optimizer state has no tensor 'exp_avg_sq_row/w'");
  }
}

class AdafactorParity : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("CABERT_ADAFACTOR_REFERENCE");
    if (path == nullptr || *path == '\0') GTEST_SKIP() << "CABERT_ADAFACTOR_REFERENCE unset";
    file = std::make_unique<io::SafetensorsFile>(path);
  }
  torch::Tensor get(const std::string& name) { return io::read_tensor(*file, name); }

  // The case's options (tests/python/adafactor_reference.py's CASES), four steps at the file's learning rates,
  // every parameter compared after every step.
  void run_case(const std::string& name, AdafactorOptions options) {
    const std::vector<std::string> names = {"matrix", "cube", "vector", "bias"};
    NamedTensors params;
    for (const auto& n : names) params.emplace_back(n, get("init/" + n).requires_grad_(true));
    Adafactor adafactor(params, {"bias"}, options);
    for (int t = 1; t <= 4; ++t) {
      adafactor.set_lr(get("lr/" + std::to_string(t)).item<double>());
      adafactor.zero_grad();
      for (auto& [n, p] : params) p.mutable_grad() = get("grad/" + std::to_string(t) + "/" + n);
      adafactor.step();
      for (const auto& [n, p] : params) {
        const torch::Tensor expected = get(name + "/" + std::to_string(t) + "/" + n);
        EXPECT_TRUE(torch::allclose(p, expected, 1e-12, 1e-12))
            << name << " step " << t << " " << n << ": max difference " << (p - expected).abs().max().item<double>();
      }
    }
  }
  std::unique_ptr<io::SafetensorsFile> file;
};

TEST_F(AdafactorParity, T5sSettings) { run_case("t5", AdafactorOptions{}); }

TEST_F(AdafactorParity, WithoutTheParameterScale) {
  AdafactorOptions options;
  options.scale_parameter = false;
  run_case("unscaled", options);
}

TEST_F(AdafactorParity, WithAFirstMomentWeightDecayAndClipping) {
  AdafactorOptions options;
  options.beta1 = 0.9, options.weight_decay = 0.1, options.clip_threshold = 0.5;
  run_case("momentum", options);
}

}  // namespace
}  // namespace cabert::train
