// Checkpoints written before the mixer registry, the tasks room and the config room (commit 34874e7, see
// tests/data/legacy_checkpoints/make_fixtures.sh) still load, and give the same hidden states, logits and
// predictions as the code that wrote them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/eval/task_model_loader.h"
#include "lib/io/checkpoint_file.h"
#include "tests/test_paths.h"

namespace cabert::eval {
namespace {

std::string fixture(const std::string& name) {
  return testing::source_dir() + "/tests/data/legacy_checkpoints/" + name;
}

// "hidden v v v ...\nlogits v v ...\n" as written by dump_outputs.cc.
std::map<std::string, std::vector<double>> read_outputs(const std::string& path) {
  std::map<std::string, std::vector<double>> values;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    double value;
    while (fields >> value) values[key].push_back(value);
  }
  return values;
}

// The same fixed ids dump_outputs.cc used: three sequences of 5, 11 and 17 tokens, padded to 17.
struct FixedBatch {
  torch::Tensor ids, segments, mask;
  std::vector<int64_t> lengths{5, 11, 17};
};
FixedBatch fixed_batch(int64_t vocab) {
  FixedBatch batch;
  batch.ids = torch::zeros({3, 17}, torch::kInt64);
  batch.segments = torch::zeros({3, 17}, torch::kInt64);
  batch.mask = torch::zeros({3, 17}, torch::kBool);
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < batch.lengths[b]; ++t) {
      batch.ids[b][t] = t == 0 ? 2 : 5 + (b * 37 + t * 13) % (vocab - 5);
      batch.segments[b][t] = t > batch.lengths[b] / 2 ? 1 : 0;
      batch.mask[b][t] = true;
    }
  }
  return batch;
}

class LegacyCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(LegacyCheckpoint, GivesTheSameHiddenStatesAndLogits) {
  LoadedTaskModel loaded = load_task_model(fixture(GetParam() + ".cabert"), torch::kCPU);
  auto expected = read_outputs(fixture(GetParam() + ".outputs.txt"));
  ASSERT_FALSE(expected["hidden"].empty());
  FixedBatch batch = fixed_batch(loaded.info.model().vocab_size());
  torch::NoGradGuard no_grad;
  torch::Tensor hidden = loaded.model->encoder(batch.ids, batch.segments, batch.mask);
  torch::Tensor logits = loaded.model(batch.ids, batch.segments, batch.mask).reshape({-1});
  std::vector<double> actual;
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t t = 0; t < batch.lengths[b]; ++t) {
      for (int64_t h = 0; h < hidden.size(2); ++h) actual.push_back(hidden[b][t][h].item<double>());
    }
  }
  ASSERT_EQ(actual.size(), expected["hidden"].size());
  for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected["hidden"][i], 1e-5) << i;
  ASSERT_EQ(logits.numel(), static_cast<int64_t>(expected["logits"].size()));
  for (int64_t i = 0; i < logits.numel(); ++i) EXPECT_NEAR(logits[i].item<double>(), expected["logits"][i], 1e-6) << i;
}

TEST_P(LegacyCheckpoint, EvaluateWritesTheSamePredictions) {
  const std::string dir = testing::temp_dir(), out = dir + "/predictions.tsv";
  auto result =
      testing::run_command(testing::cabert_binary() + " -q --threads 1 evaluate --model " +
                           fixture(GetParam() + ".cabert") + " --tokenizer " + fixture("tok.model") + " --data " +
                           fixture("dev.tsv") + " --predictions " + out + " -o " + dir + "/metrics.cabert");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(testing::read_text(out), testing::read_text(fixture(GetParam() + ".predictions.tsv")));
}

INSTANTIATE_TEST_SUITE_P(EveryMixerFamily, LegacyCheckpoint,
                         ::testing::Values("bert-all-switches", "convbert", "lightconv", "dynamicconv"));

// A checkpoint's config goes through the validation presets get: num_heads 0 is refused with the file's
// name instead of dividing by zero when the model is built.
TEST(StoredModelConfig, InvalidConfigIsRefusedNamingTheFile) {
  io::Checkpoint legacy = io::load_checkpoint(fixture("lightconv.cabert"));
  legacy.info.mutable_model()->set_num_heads(0);
  io::NamedTensors tensors(legacy.tensors.begin(), legacy.tensors.end());
  // Beside the test's temporary directory, which run_command empties.
  const std::string path = testing::temp_dir() + "-zero-heads.cabert";
  io::save_checkpoint(path, legacy.info, tensors);
  EXPECT_EQ(testing::data_error_message([&] { io::load_checkpoint(path); }),
            path + ": the model config stored in the file is invalid: expected positive embedding_size, "
                   "hidden_size, num_layers, num_heads, intermediate_size, max_length, got 8, 16, 2, 0, 24, 64");
  auto result = testing::run_command(testing::cabert_binary() + " -q evaluate --model " + path + " --tokenizer " +
                                     fixture("tok.model") + " --data " + fixture("dev.tsv"));
  EXPECT_EQ(result.exit_code, 3) << result.err;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace cabert::eval
