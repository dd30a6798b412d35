// A decoder layer (causal mixer + cross-attention + FFN) decodes step by step exactly as its full forward,
// never sees later target tokens, keeps decoding after beam reordering, and refuses a bidirectional mixer.
#include <gtest/gtest.h>

#include "lib/config/model_config_text.h"
#include "lib/core/errors.h"
#include "lib/models/decoder_layer.h"
#include "lib/models/light_dynamic_conv_block.h"

namespace cabert::models {
namespace {

constexpr int64_t kHidden = 16;

std::shared_ptr<Mixer> make_mixer(const std::string& kind) {
  if (kind == "attention") return std::make_shared<CausalSelfAttentionImpl>(kHidden, 4, 0.0);
  pb::ModelConfig config = config::load_model_config(
      kind + "-tiny", {"conv_block.causal=true", "conv_block.kernel_sizes=5", "hidden_size=16", "num_heads=4"});
  return std::make_shared<ConvBlockImpl>(config, 0);
}

DecoderLayer make_layer(const std::string& kind) {
  DecoderLayerSizes sizes;
  sizes.hidden = kHidden, sizes.heads = 4, sizes.intermediate = 24;
  DecoderLayer layer(make_mixer(kind), kind == "attention" ? "self_attention" : "conv", sizes);
  layer->to(torch::kDouble);
  layer->eval();
  return layer;
}

class DecoderLayerSteps : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderLayerSteps, StepByStepEqualsTheFullForwardAndContinuesAfterReordering) {
  torch::manual_seed(11);
  DecoderLayer layer = make_layer(GetParam());
  torch::NoGradGuard no_grad;
  const int64_t N = 3, T = 6, S = 4;
  torch::Tensor x = torch::randn({N, T, kHidden}, torch::kDouble);
  torch::Tensor memory = torch::randn({N, S, kHidden}, torch::kDouble);
  torch::Tensor memory_mask = torch::ones({N, S}, torch::kBool);
  memory_mask[2].narrow(0, 2, 2).fill_(false);  // a shorter source
  torch::Tensor full = layer->forward(x, {}, memory, memory_mask);
  DecoderLayerState state;
  layer->start_decoding(memory, state);
  for (int64_t t = 0; t < 3; ++t) {
    torch::Tensor step = layer->forward_step(x.narrow(1, t, 1), memory_mask, state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-12, 1e-12)) << t;
  }
  // Beam search keeps rows 2, 0, 2: the states follow, and so do the source rows the caller holds.
  torch::Tensor order = torch::tensor({2, 0, 2}, torch::kInt64);
  state.reorder(order);
  torch::Tensor kept_x = x.index_select(0, order), kept_mask = memory_mask.index_select(0, order);
  torch::Tensor kept_full = layer->forward(kept_x, {}, memory.index_select(0, order), kept_mask);
  for (int64_t t = 3; t < T; ++t) {
    torch::Tensor step = layer->forward_step(kept_x.narrow(1, t, 1), kept_mask, state);
    EXPECT_TRUE(torch::allclose(step.squeeze(1), kept_full.select(1, t), 1e-12, 1e-12)) << t;
  }
}

TEST_P(DecoderLayerSteps, LaterTargetTokensDoNotChangeEarlierOutputs) {
  torch::manual_seed(12);
  DecoderLayer layer = make_layer(GetParam());
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 5, kHidden}, torch::kDouble),
                memory = torch::randn({2, 3, kHidden}, torch::kDouble);
  torch::Tensor a = layer->forward(x, {}, memory, {});
  for (int64_t t = 0; t + 1 < 5; ++t) {
    torch::Tensor changed = x.clone();
    changed.narrow(1, t + 1, 5 - t - 1).normal_();
    torch::Tensor b = layer->forward(changed, {}, memory, {});
    EXPECT_TRUE(torch::equal(a.narrow(1, 0, t + 1), b.narrow(1, 0, t + 1))) << t;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDecoderMixer, DecoderLayerSteps,
                         ::testing::Values("lightconv", "dynamicconv", "attention"));

TEST(DecoderLayer, RefusesABidirectionalMixer) {
  pb::ModelConfig config = config::load_model_config("lightconv-tiny", {});
  DecoderLayerSizes sizes;
  sizes.hidden = 64, sizes.heads = 2, sizes.intermediate = 32;
  try {
    DecoderLayer layer(std::make_shared<ConvBlockImpl>(config, 0), "conv", sizes);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_EQ(std::string(error.what()), "decoder layer: expected a causal mixer, got cabert::models::ConvBlockImpl (a "
                                         "decoder must not see later target tokens)");
  }
}

}  // namespace
}  // namespace cabert::models
