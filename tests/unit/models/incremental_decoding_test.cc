// Incremental decoding of the causal mixers: step by step equals the full forward, the state stays k-1
// positions long, reordering follows the beams, and a causal mixer never sees the future.
#include <gtest/gtest.h>

#include "lib/config/model_config_text.h"
#include "lib/core/errors.h"
#include "lib/models/light_dynamic_conv_block.h"
#include "lib/ops/kernel_path.h"

namespace cabert::models {
namespace {

pb::ModelConfig causal_config(const std::string& preset, int kernel) {
  return config::load_model_config(
      preset, {"conv_block.causal=true", "conv_block.kernel_sizes=" + std::to_string(kernel), "hidden_size=16",
               "num_heads=4", "intermediate_size=32", "embedding_size=16"});
}

struct Case {
  std::string preset;
  int kernel;
  ops::KernelPath path;
};

class ConvBlockSteps : public ::testing::TestWithParam<Case> {};

TEST_P(ConvBlockSteps, StepByStepEqualsTheFullForward) {
  const Case& c = GetParam();
  ops::ScopedKernelPath path(c.path);
  torch::manual_seed(5);
  ConvBlock block(causal_config(c.preset, c.kernel), 0);
  block->to(torch::kDouble);
  block->eval();
  ASSERT_TRUE(block->decodes_incrementally());
  const int64_t N = 3, T = 6;
  torch::Tensor x = torch::randn({N, T, 16}, torch::kDouble);
  torch::NoGradGuard no_grad;
  torch::Tensor full = block->forward(x, torch::ones({N, T}, torch::kBool));
  MixerState state;
  for (int64_t t = 0; t < T; ++t) {
    torch::Tensor step = block->forward_step(x.narrow(1, t, 1), state);
    ASSERT_EQ(step.sizes(), (std::vector<int64_t>{N, 1, 16}));
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-12, 1e-12)) << "t=" << t;
    // O(k) per sequence, whatever the number of steps so far.
    EXPECT_EQ(state.inputs.sizes(), (std::vector<int64_t>{N, c.kernel - 1, 16}));
  }
}

TEST_P(ConvBlockSteps, ChangingALaterTokenLeavesEarlierOutputsBitIdentical) {
  const Case& c = GetParam();
  ops::ScopedKernelPath path(c.path);
  torch::manual_seed(6);
  ConvBlock block(causal_config(c.preset, c.kernel), 0);
  block->eval();
  torch::NoGradGuard no_grad;
  const int64_t T = 7;
  torch::Tensor x = torch::randn({2, T, 16});
  for (int64_t t = 0; t + 1 < T; ++t) {
    torch::Tensor changed = x.clone();
    changed.narrow(1, t + 1, T - t - 1).normal_();
    torch::Tensor a = block->forward(x, {}), b = block->forward(changed, {});
    EXPECT_TRUE(torch::equal(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1))) << "t=" << t;
    EXPECT_FALSE(torch::equal(a.narrow(1, t + 1, 1), b.narrow(1, t + 1, 1))) << "t=" << t;
  }
}

// Kernel 3 (shorter than the sequence) and 9 (longer): the state starts as zeros, as the padding does.
INSTANTIATE_TEST_SUITE_P(LightAndDynamic, ConvBlockSteps,
                         ::testing::Values(Case{"lightconv-tiny", 3, ops::KernelPath::kFused},
                                           Case{"lightconv-tiny", 9, ops::KernelPath::kFused},
                                           Case{"dynamicconv-tiny", 3, ops::KernelPath::kFused},
                                           Case{"dynamicconv-tiny", 9, ops::KernelPath::kFused},
                                           Case{"dynamicconv-tiny", 4, ops::KernelPath::kReference}),
                         [](const auto& info) {
                           return info.param.preset.substr(0, info.param.preset.find('-')) + "_k" +
                                  std::to_string(info.param.kernel) +
                                  (info.param.path == ops::KernelPath::kFused ? "_fused" : "_reference");
                         });

TEST(MixerState, ReorderFollowsTheBeams) {
  MixerState state;
  state.inputs = torch::arange(3).view({3, 1, 1}).expand({3, 2, 4}).clone();
  state.reorder(torch::tensor({2, 2, 0}, torch::kInt64));
  EXPECT_TRUE(torch::equal(state.inputs.select(1, 0).select(1, 0), torch::tensor({2, 2, 0}, torch::kInt64)));
  EXPECT_FALSE(state.keys.defined());
}

TEST(MixerState, EncoderMixersRefuseToDecodeStepByStep) {
  ConvBlock centred(config::load_model_config("lightconv-tiny", {}), 0);
  EXPECT_FALSE(centred->decodes_incrementally());
  MixerState state;
  try {
    centred->forward_step(torch::zeros({1, 1, 64}), state);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()),
              "the cabert::models::ConvBlockImpl mixer looks at both sides of every position, so it cannot decode "
              "step by step; decoders use causal mixers (e.g. conv_block.causal=true)");
  }
}

}  // namespace
}  // namespace cabert::models
