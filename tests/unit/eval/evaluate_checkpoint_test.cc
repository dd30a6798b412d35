// eval::open_evaluation / evaluate_checkpoint on a tiny SST-2 model fine-tuned once per process (bert-tiny-absolute,
// 100 rows of the shipped quickstart sample, one epoch): the rows are the records `cabert evaluate -o` writes;
// what the checkpoint cannot be asked is refused with the command's messages before anything is written; the
// predictions appear only once the evaluation is finished. The task-compatibility rule needs no checkpoint.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "formats/task.pb.h"
#include "lib/core/errors.h"
#include "lib/eval/evaluate_checkpoint.h"
#include "lib/tasks/task_inputs.h"
#include "tests/test_paths.h"

namespace cabert::eval {
namespace {

namespace fs = std::filesystem;
using testing::cabert_binary;
using testing::run_command;
using testing::usage_error_message;

std::string head_lines(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::string text, line;
  for (size_t i = 0; i < count && std::getline(in, line); ++i) text += line + "\n";
  return text;
}

class EvaluateCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (fs::temp_directory_path() / ("cabert_evaluate_checkpoint_" + std::to_string(getpid()))).string();
    fs::create_directories(dir_);
    const std::string sample = testing::source_dir() + "/recipes/quickstart/data/SST-2";
    testing::write_text(dir_ + "/train.tsv", head_lines(sample + "/train.tsv", 101));
    testing::write_text(dir_ + "/dev.tsv", head_lines(sample + "/dev.tsv", 31));
    const auto result = run_command(cabert_binary() +
                                    " --threads 1 -q finetune --preset bert-tiny-absolute "
                                    "--tokenizer " +
                                    testing::alice_tokenizer() + " --task SST-2 --train " + dir_ + "/train.tsv --dev " +
                                    dir_ + "/dev.tsv --epochs 1 --max-length 32 --model-dir " + dir_ + "/sst2");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static EvaluationOptions options_for(const std::vector<std::string>& data) {
    EvaluationOptions options;
    options.checkpoint = checkpoint();
    options.data = data;
    return options;
  }
  static std::string checkpoint() { return dir_ + "/sst2/best.cabert"; }
  static std::string dev() { return dir_ + "/dev.tsv"; }

  static inline std::string dir_;
};

TEST_F(EvaluateCheckpoint, RowsAreTheRecordsTheCommandWrites) {
  const auto command = run_command(cabert_binary() + " --threads 1 -q evaluate --model " + checkpoint() + " --data " +
                                   dev() + " -o " + dir_ + "/command.cabert");
  ASSERT_EQ(command.exit_code, 0) << command.err;
  const auto written = testing::read_records<pb::TaskMetrics>(dir_ + "/command.cabert", "cabert.pb.TaskMetrics");
  ASSERT_EQ(written.size(), 1u);

  EvaluationOptions options = options_for({dev()});
  options.output = dir_ + "/library.cabert";
  const std::vector<EvaluatedFile> rows = evaluate_checkpoint(options);
  ASSERT_EQ(rows.size(), 1u);
  const pb::TaskMetrics& row = rows[0].record;
  const pb::TaskMetrics& expected = written[0];
  EXPECT_TRUE(rows[0].labeled);
  EXPECT_EQ(row.kind(), pb::TaskMetrics::EVALUATION);
  EXPECT_EQ(row.kind(), expected.kind());
  EXPECT_EQ(row.model(), "sst2");  // the checkpoint's directory
  EXPECT_EQ(row.model(), expected.model());
  EXPECT_EQ(row.task(), "SST-2");
  EXPECT_EQ(row.task(), expected.task());
  EXPECT_EQ(row.split(), "dev");
  EXPECT_EQ(row.split(), expected.split());
  EXPECT_EQ(row.data(), dev());
  EXPECT_EQ(row.data(), expected.data());
  EXPECT_EQ(row.examples(), 30u);
  EXPECT_EQ(row.examples(), expected.examples());
  EXPECT_EQ(row.checkpoint(), fs::absolute(checkpoint()).lexically_normal().string());
  EXPECT_EQ(row.checkpoint(), expected.checkpoint());
  EXPECT_NEAR(row.score(), expected.score(), 1e-9);
  ASSERT_EQ(row.metrics_size(), expected.metrics_size());
  EXPECT_EQ(row.metrics().count("accuracy"), 1u);
  for (const auto& [metric, value] : expected.metrics()) {
    ASSERT_EQ(row.metrics().count(metric), 1u) << metric;
    EXPECT_NEAR(row.metrics().at(metric), value, 1e-9) << metric;
    EXPECT_EQ(rows[0].metrics.at(metric), row.metrics().at(metric)) << metric;  // the row's map is the record's
  }
  EXPECT_EQ(rows[0].metrics.size(), static_cast<size_t>(row.metrics_size()));
  char score[32];
  std::snprintf(score, sizeof score, "%.2f", row.score());
  EXPECT_NE(command.out.find("| SST-2 | " + dev() + " | 30 | " + score + " | accuracy "), std::string::npos)
      << command.out;

  // The library's records file holds the row.
  const auto recorded = testing::read_records<pb::TaskMetrics>(options.output, "cabert.pb.TaskMetrics");
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_EQ(recorded[0].task(), row.task());
  EXPECT_EQ(recorded[0].examples(), row.examples());
  EXPECT_EQ(recorded[0].score(), row.score());
  EXPECT_EQ(recorded[0].metrics().at("accuracy"), row.metrics().at("accuracy"));
}

TEST_F(EvaluateCheckpoint, ATaskTheCheckpointCannotBeScoredAsIsRefused) {
  EvaluationOptions options = options_for({dev()});
  options.task = "CoLA";
  options.output = dir_ + "/refused.cabert";
  EXPECT_EQ(usage_error_message([&] { open_evaluation(options); }),
            checkpoint() + " was fine-tuned on SST-2; it cannot be evaluated as CoLA (SST-2's labels judge sentiment, "
                           "CoLA's acceptability)");
  EXPECT_FALSE(fs::exists(options.output));
  options.task = "SST-2";  // its own task, named
  EXPECT_EQ(open_evaluation(options)->files(), 1u);
}

TEST_F(EvaluateCheckpoint, RequestsRefusedBeforeAnythingIsWritten) {
  EvaluationOptions options = options_for({dev(), dev()});
  options.output = dir_ + "/never.cabert";
  options.predictions = dir_ + "/never.tsv";
  EXPECT_EQ(usage_error_message([&] { open_evaluation(options); }),
            "--predictions: with several data files, give a directory (one file per data file)");
  options.predictions = dir_ + "/never/";
  EXPECT_EQ(usage_error_message([&] { open_evaluation(options); }),
            "--predictions: " + dev() + " and " + dev() + " would both be written to " + dir_ +
                "/never/SST-2.tsv (the same file name), the second over the first; evaluate them in separate runs "
                "or with separate --predictions directories");
  options = options_for({dev()});
  options.unmatched_label = "1";
  EXPECT_EQ(usage_error_message([&] { open_evaluation(options); }),
            "--unmatched-label: for text-to-text models; " + checkpoint() + " predicts a label with its task head");
  testing::write_text(dir_ + "/empty.tsv", "sentence\tlabel\n");
  options = options_for({dev(), dir_ + "/empty.tsv"});
  options.output = dir_ + "/never.cabert";
  EXPECT_EQ(testing::data_error_message([&] { open_evaluation(options); }),
            dir_ + "/empty.tsv: expected examples to evaluate, got none");
  EXPECT_FALSE(fs::exists(dir_ + "/never.cabert"));
  EXPECT_FALSE(fs::exists(dir_ + "/never.tsv"));
  EXPECT_FALSE(fs::exists(dir_ + "/never/SST-2.tsv"));
}

TEST_F(EvaluateCheckpoint, PredictionsAreWrittenWhenFinishedAndUnlabelledFilesAreNotRecorded) {
  testing::write_text(dir_ + "/test.tsv", "index\tsentence\n0\ta charming journey\n1\tbleak and dull\n");
  EvaluationOptions options = options_for({dir_ + "/test.tsv"});
  options.predictions = dir_ + "/predictions/";
  options.output = dir_ + "/test.cabert";
  std::unique_ptr<CheckpointEvaluation> evaluation = open_evaluation(options);
  EXPECT_FALSE(evaluation->translation());
  ASSERT_EQ(evaluation->files(), 1u);
  const EvaluatedFile row = evaluation->evaluate(0);
  EXPECT_FALSE(row.labeled);
  EXPECT_TRUE(row.metrics.empty());
  EXPECT_EQ(row.record.examples(), 2u);
  EXPECT_EQ(row.record.task(), "SST-2");
  EXPECT_FALSE(fs::exists(dir_ + "/predictions/SST-2.tsv"));
  EXPECT_FALSE(fs::exists(options.output));
  evaluation->finish();
  EXPECT_EQ(testing::read_text(dir_ + "/predictions/SST-2.tsv").rfind("index\tprediction\n0\t", 0), 0u);
  EXPECT_TRUE(testing::read_records<pb::TaskMetrics>(options.output, "cabert.pb.TaskMetrics").empty());
}

TEST(EvaluatedDefinition, OnlyTasksThatJudgeTheSameFromTheSameInput) {
  tasks::TaskDefinition mnli, qqp, sst;
  ASSERT_TRUE(tasks::known_task("MNLI", &mnli));
  ASSERT_TRUE(tasks::known_task("QQP", &qqp));
  ASSERT_TRUE(tasks::known_task("SST-2", &sst));
  EXPECT_EQ(evaluated_definition(mnli, "", "m.cabert").name, "MNLI");
  EXPECT_EQ(evaluated_definition(mnli, "AX", "m.cabert").name, "AX");
  EXPECT_EQ(evaluated_definition(qqp, "MRPC", "m.cabert").name, "MRPC");
  // A single-sentence model never sees a pair's second sentence: no judgement to compare.
  EXPECT_EQ(usage_error_message([&] { evaluated_definition(sst, "MRPC", "m.cabert"); }),
            "m.cabert was fine-tuned on SST-2; it cannot be evaluated as MRPC");
  EXPECT_EQ(usage_error_message([&] { evaluated_definition(sst, "reviews", "m.cabert"); }),
            "m.cabert was fine-tuned on SST-2; it cannot be evaluated as reviews");
}

TEST(RecordModelName, TheCheckpointsDirectoryOrTheRunsParent) {
  EXPECT_EQ(record_model_name("", "/runs/sst2/best.cabert"), "sst2");
  EXPECT_EQ(record_model_name("", "/runs/sst2/run-3/best.cabert"), "sst2");
  EXPECT_EQ(record_model_name("mine", "/runs/sst2/run-3/best.cabert"), "mine");
}

}  // namespace
}  // namespace cabert::eval
