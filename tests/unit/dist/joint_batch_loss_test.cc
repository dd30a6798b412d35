// The data-parallel loss (lib/train/pretraining_objectives.h, joint_batch_loss): ranks holding halves of a
// batch, each drawing an example's masks from that example's seed, produce gradients whose average (what
// the all-reduce computes) is the gradient of one process holding the whole batch, although the halves
// mask different numbers of tokens. No network: the two ranks' backward passes run one after the other.
#include <gtest/gtest.h>

#include "lib/config/presets.h"
#include "lib/core/random.h"
#include "lib/data/pretraining_batches.h"
#include "lib/train/pretraining_objectives.h"

namespace cabert::train {
namespace {

std::vector<pb::PretrainingExample> examples(int count) {
  std::vector<pb::PretrainingExample> out;
  std::mt19937_64 rng(3);
  for (int e = 0; e < count; ++e) {
    pb::PretrainingExample example;
    example.add_token_ids(2);
    const int length = 6 + static_cast<int>(rng() % 10);  // halves differ in length and masked tokens
    for (int i = 0; i < length; ++i) example.add_token_ids(13 + static_cast<int>(rng() % 80));
    example.add_token_ids(3);
    example.set_segment_a_length(length + 2);
    out.push_back(example);
  }
  return out;
}

data::Batch batch_of(const std::vector<pb::PretrainingExample>& all, size_t begin, size_t end) {
  std::vector<pb::PretrainingExample> slice(all.begin() + begin, all.begin() + end);
  data::Batch batch = data::make_batch(slice);
  for (size_t i = begin; i < end; ++i) batch.row_seeds.push_back(mix_seed(99, i));
  return batch;
}

std::vector<torch::Tensor> gradients(torch::nn::Module& module) {
  std::vector<torch::Tensor> out;
  for (auto& p : module.parameters()) out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

void expect_joint_equals_whole(const std::string& preset, Objective objective) {
  pb::ModelConfig config = config::preset_config(preset);
  config.set_vocab_size(100);
  config.set_dropout(0);
  config.set_attention_dropout(0);
  if (config.has_conv_block()) config.mutable_conv_block()->set_weight_dropout(0);
  torch::manual_seed(5);
  Objectives objectives(config, objective, torch::kCPU);
  objectives.set_first_regular_id(13);  // ids 5-12: sentinels for span corruption
  if (objective == Objective::kSpanCorruption) objectives.set_span_corruption(0.15, 3.0);
  torch::nn::Module& module = objectives.module();
  std::mt19937_64 unused(0);
  const auto all = examples(8);

  module.zero_grad();
  StepOutput whole = objectives.compute(batch_of(all, 0, 8), unused);
  whole.loss.backward();
  const std::vector<torch::Tensor> expected = gradients(module);

  // Rank r holds examples [3r, ...): uneven halves 3 + 5.
  std::vector<StepOutput> parts{objectives.compute(batch_of(all, 0, 3), unused),
                                objectives.compute(batch_of(all, 3, 8), unused)};
  std::vector<double> totals(parts[0].terms.size(), 0.0);
  for (const auto& part : parts) {
    ASSERT_EQ(part.terms.size(), totals.size());
    for (size_t i = 0; i < totals.size(); ++i) totals[i] += part.terms[i].count;
  }
  EXPECT_NE(parts[0].terms[0].count * 8, totals[0] * 3) << "the test needs halves with unequal token shares";
  module.zero_grad();
  double joint_loss = 0;
  for (const auto& part : parts) {
    torch::Tensor loss = joint_batch_loss(part, totals, 2) / 2.0;  // the all-reduce averages over 2 ranks
    joint_loss += loss.item<double>();
    loss.backward();
  }
  EXPECT_NEAR(joint_loss, whole.loss.item<double>(), 1e-5);
  const std::vector<torch::Tensor> got = gradients(module);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-4, 1e-6))
        << preset << " parameter " << i << ": max difference " << (got[i] - expected[i]).abs().max().item<double>();
  }
}

TEST(JointBatchLoss, MlmHalvesAverageToTheWholeBatchGradient) {
  expect_joint_equals_whole("bert-tiny-composite", Objective::kMlm);
}

TEST(JointBatchLoss, SpanCorruptionHalvesAverageToTheWholeBatchGradient) {
  expect_joint_equals_whole("tay-lightconv-tiny", Objective::kSpanCorruption);
}

TEST(JointBatchLoss, WeightsEachTermByItsShareOfTheJointCount) {
  StepOutput out;
  out.loss = torch::tensor(0.0);
  out.terms.push_back({torch::tensor(2.0), 1.0, 3});    // mean 2 over 3 tokens here
  out.terms.push_back({torch::tensor(4.0), 50.0, 10});  // mean 4 over 10 tokens here
  // Over 2 ranks with 12 and 40 tokens in all: 2 * (1 * 2 * 3/12 + 50 * 4 * 10/40) = 101.
  EXPECT_DOUBLE_EQ(joint_batch_loss(out, {12, 40}, 2).item<double>(), 101.0);
  // Alone, the loss is the output's own.
  EXPECT_DOUBLE_EQ(joint_batch_loss(out, {3, 10}, 1).item<double>(), 0.0);
}

}  // namespace
}  // namespace cabert::train
