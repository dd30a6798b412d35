// End to end: `cabert finetune` and `cabert evaluate` on a tiny randomly initialised model and small slices of
// the real GLUE / XQuAD files (../shared/data; skipped when absent). Kept fast: bert-tiny-absolute, tens of
// examples per task (SST-2: 2,000 to beat the majority baseline), max length 48-96, one intra-op thread
// (LibTorch threads spin-wait when the cores are shared with other jobs, which makes 2 threads 10x slower).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "formats/task.pb.h"
#include "lib/io/record_file.h"
#include "lib/tasks/task_data.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

namespace fs = std::filesystem;
using testing::cabert_binary;
using testing::read_text;
using testing::run_command;
using testing::write_text;

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Header (if any) + rows [first, first + count) of a GLUE file.
void slice(const std::string& from, const std::string& to, bool header, size_t first, size_t count) {
  auto lines = lines_of(from);
  std::string text;
  size_t start = header ? 1 : 0;
  if (header) text += lines[0] + "\n";
  for (size_t i = start + first; i < std::min(lines.size(), start + first + count); ++i) text += lines[i] + "\n";
  write_text(to, text);
}

std::vector<pb::TaskMetrics> read_metrics(const std::string& path) {
  return testing::read_records<pb::TaskMetrics>(path, "cabert.pb.TaskMetrics");
}

const pb::TaskMetrics* best_record(const std::vector<pb::TaskMetrics>& records, const std::string& task,
                                   uint32_t run = 0) {
  for (const auto& record : records) {
    if (record.kind() == pb::TaskMetrics::BEST_OF_RUN && record.task() == task && record.run() == run) return &record;
  }
  return nullptr;
}

class FinetuneCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = testing::shared_data_dir();
    if (data_.empty()) return;
    dir_ = (fs::temp_directory_path() / ("cabert_finetune_cli_" + std::to_string(getpid()))).string();
    fs::create_directories(dir_);
    // Tokenizer trained on SST-2 and RTE sentences.
    std::string text;
    auto sst = lines_of(data_ + "/glue/SST-2/train.tsv");
    for (size_t i = 1; i < std::min<size_t>(sst.size(), 6000); ++i) text += tasks::split_tabs(sst[i])[0] + "\n";
    auto rte = lines_of(data_ + "/glue/RTE/train.tsv");
    for (size_t i = 1; i < std::min<size_t>(rte.size(), 800); ++i) {
      auto fields = tasks::split_tabs(rte[i]);
      text += fields[1] + "\n" + fields[2] + "\n";
    }
    write_text(dir_ + "/text.txt", text);
    auto result = run_command(cabert_binary() + " --threads 1 tokenize train -i " + dir_ +
                              "/text.txt --vocab-size 1500 "
                              "--lowercase --sentinels 4 --model-prefix " +
                              dir_ + "/tok");
    ASSERT_EQ(result.exit_code, 0) << result.err;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  void SetUp() override {
    if (data_.empty()) GTEST_SKIP() << "../shared/data is absent (user clone): skipped";
  }

  static std::string finetune(const std::string& arguments) {
    return cabert_binary() + " --threads 1 --quiet finetune --preset bert-tiny-absolute --tokenizer " + dir_ +
           "/tok.model " + arguments;
  }

  static inline std::string data_, dir_;
};

TEST_F(FinetuneCli, Sst2BeatsTheMajorityBaseline) {
  std::string task = dir_ + "/sst2";
  slice(data_ + "/glue/SST-2/train.tsv", task + "/train.tsv", true, 0, 2000);
  slice(data_ + "/glue/SST-2/dev.tsv", task + "/dev.tsv", true, 0, 200);
  // Majority class of this dev slice.
  size_t ones = 0, rows = 0;
  for (const auto& line : lines_of(task + "/dev.tsv")) {
    auto fields = tasks::split_tabs(line);
    if (fields[1] == "label") continue;
    ++rows;
    ones += fields[1] == "1";
  }
  double majority = static_cast<double>(std::max(ones, rows - ones)) / rows;
  auto result = run_command(finetune("--task SST-2 --data " + task + " --model-dir " + dir_ +
                                     "/sst2-model --epochs 3 --lr 1e-3 --max-length 48"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("SST-2 dev: best"), std::string::npos) << result.out;
  auto records = read_metrics(dir_ + "/sst2-model/metrics.cabert");
  const pb::TaskMetrics* best = best_record(records, "SST-2");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->examples(), 200u);
  EXPECT_GT(best->metrics().at("accuracy"), majority + 0.04) << "majority baseline " << majority;
  EXPECT_EQ(std::count_if(records.begin(), records.end(),
                          [](const pb::TaskMetrics& r) { return r.kind() == pb::TaskMetrics::EPOCH; }),
            3);
  EXPECT_TRUE(fs::exists(dir_ + "/sst2-model/best.cabert"));

  // Evaluating the kept checkpoint reproduces the best epoch's dev accuracy.
  result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + dir_ +
                       "/sst2-model/best.cabert --data " + task + "/dev.tsv -o " + dir_ +
                       "/sst2-eval.cabert --predictions " + dir_ + "/sst2-dev.tsv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto evaluation = read_metrics(dir_ + "/sst2-eval.cabert");
  ASSERT_EQ(evaluation.size(), 1u);
  EXPECT_NEAR(evaluation[0].metrics().at("accuracy"), best->metrics().at("accuracy"), 1e-9);
  auto predictions = lines_of(dir_ + "/sst2-dev.tsv");
  ASSERT_EQ(predictions.size(), 201u);
  EXPECT_EQ(predictions[0], "id\tprediction\tgold\tscores");
  size_t correct = 0;
  for (size_t i = 1; i < predictions.size(); ++i) {
    auto fields = tasks::split_tabs(predictions[i]);
    ASSERT_EQ(fields.size(), 4u);
    correct += fields[1] == fields[2];
  }
  EXPECT_NEAR(static_cast<double>(correct) / 200, evaluation[0].metrics().at("accuracy"), 1e-9);

  // GLUE test file -> submission TSV: header, one row per test example, labels from {0, 1}.
  slice(data_ + "/glue/SST-2/test.tsv", task + "/test.tsv", true, 0, 50);
  result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + dir_ +
                       "/sst2-model/best.cabert --data " + task + "/test.tsv --predictions " + dir_ + "/submission/");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto submission = lines_of(dir_ + "/submission/SST-2.tsv");
  ASSERT_EQ(submission.size(), 51u);
  EXPECT_EQ(submission[0], "index\tprediction");
  for (size_t i = 1; i < submission.size(); ++i) {
    auto fields = tasks::split_tabs(submission[i]);
    ASSERT_EQ(fields.size(), 2u);
    EXPECT_EQ(fields[0], std::to_string(i - 1));
    EXPECT_TRUE(fields[1] == "0" || fields[1] == "1") << submission[i];
  }
}

struct GlueCase {
  std::string task, dir;
  bool header;
  std::vector<std::string> metrics;
  std::set<std::string> labels;  // empty: a number (STS-B)
  std::string source = "";       // directory with train/dev/test.tsv (default: the shared GLUE one)
  std::string train_file = "train.tsv";
  size_t train_offset = 0;
};

TEST_F(FinetuneCli, EveryGlueTaskFineTunesEvaluatesAndWritesSubmissions) {
  // QQP is not shipped: QQP-shaped files from MRPC pairs (id, qid1, qid2, question1, question2, is_duplicate).
  std::string qqp = dir_ + "/QQP-source";
  auto mrpc = lines_of(data_ + "/glue/MRPC/train.tsv");
  for (const char* split : {"train", "dev", "test"}) {
    bool test = std::string(split) == "test";
    std::string text = test ? "id\tquestion1\tquestion2\n" : "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n";
    for (size_t i = 1; i <= 60; ++i) {
      auto f = tasks::split_tabs(mrpc[i + (test ? 200 : std::string(split) == "dev" ? 100 : 0)]);
      text += std::to_string(i) + "\t" + (test ? "" : f[1] + "\t" + f[2] + "\t") + f[3] + "\t" + f[4] +
              (test ? "" : "\t" + f[0]) + "\n";
    }
    write_text(qqp + "/" + split + ".tsv", text);
  }
  std::vector<GlueCase> cases = {
      {"CoLA", "CoLA", false, {"mcc", "accuracy"}, {"0", "1"}},
      {"MRPC", "MRPC", true, {"f1", "accuracy"}, {"0", "1"}},
      {"STS-B", "STS-B", true, {"pearson", "spearman"}, {}},
      {"QQP", "QQP", true, {"f1", "accuracy"}, {"0", "1"}, qqp},
      // No QNLI train file is shipped: train on other dev rows.
      {"QNLI", "QNLI", true, {"accuracy"}, {"entailment", "not_entailment"}, "", "dev.tsv", 100},
      {"RTE", "RTE", true, {"accuracy"}, {"entailment", "not_entailment"}},
      {"WNLI", "WNLI", true, {"accuracy"}, {"0", "1"}},
  };
  std::string summary_inputs;
  for (const auto& c : cases) {
    std::string task = dir_ + "/" + c.dir;
    std::string source = c.source.empty() ? data_ + "/glue/" + c.dir : c.source;
    slice(source + "/" + c.train_file, task + "/train.tsv", c.header, c.train_offset, 40);
    slice(source + "/dev.tsv", task + "/dev.tsv", c.header, 0, 24);
    slice(source + "/test.tsv", task + "/test.tsv", true, 0, 30);
    std::string model = dir_ + "/" + c.dir + "-model";
    auto result = run_command(
        finetune("--task " + c.task + " --data " + task + " --model-dir " + model + " --epochs 1 --max-length 48"));
    ASSERT_EQ(result.exit_code, 0) << c.task << ": " << result.err;
    auto records = read_metrics(model + "/metrics.cabert");
    const pb::TaskMetrics* best = best_record(records, c.task);
    ASSERT_NE(best, nullptr) << c.task;
    EXPECT_EQ(best->examples(), 24u);
    for (const auto& metric : c.metrics) EXPECT_EQ(best->metrics().count(metric), 1u) << c.task << " " << metric;
    summary_inputs += " " + model + "/metrics.cabert";
    // The controls: every record carries the dev split's control score and the truncated examples (of the 40
    // trained on, and of the 24 dev examples).
    ASSERT_TRUE(best->has_control_score()) << c.task;
    ASSERT_TRUE(best->has_train_truncated() && best->has_dev_truncated()) << c.task;
    EXPECT_EQ(best->train_examples(), 40u) << c.task;
    EXPECT_LE(best->train_truncated(), 40u) << c.task;
    EXPECT_LE(best->dev_truncated(), 24u) << c.task;
    if (c.task == "CoLA" || c.task == "STS-B") {
      EXPECT_EQ(best->control_score(), 0.0) << c.task;  // MCC, correlations
    }
    if (c.task == "MRPC") {
      // The majority label of the 40 training rows, predicted on the 24 dev rows: F1 of "1" and accuracy by hand.
      auto labels = [](const std::string& path) {
        std::vector<std::string> out;
        for (const auto& line : lines_of(path)) out.push_back(tasks::split_tabs(line)[0]);
        out.erase(out.begin());  // the header
        return out;
      };
      const auto train = labels(task + "/train.tsv"), dev = labels(task + "/dev.tsv");
      const std::string majority = std::count(train.begin(), train.end(), "1") * 2 > 40 ? "1" : "0";
      const double right = std::count(dev.begin(), dev.end(), majority), positives = std::count(dev.begin(), dev.end(), "1");
      const double f1 = majority == "1" ? 2 * positives / (2 * positives + (24 - positives)) : 0;
      EXPECT_NEAR(best->control_score(), 100 * (right / 24 + f1) / 2, 1e-9);
      EXPECT_NE(best->control().find("the majority training label '" + majority + "'"), std::string::npos)
          << best->control();
    }

    result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + model + "/best.cabert --data " +
                         task + "/test.tsv --predictions " + dir_ + "/glue-submission/");
    ASSERT_EQ(result.exit_code, 0) << c.task << ": " << result.err;
    auto submission = lines_of(dir_ + "/glue-submission/" + c.task + ".tsv");
    ASSERT_EQ(submission.size(), 31u) << c.task;
    EXPECT_EQ(submission[0], "index\tprediction");
    for (size_t i = 1; i < submission.size(); ++i) {
      auto fields = tasks::split_tabs(submission[i]);
      ASSERT_EQ(fields.size(), 2u);
      if (c.labels.empty()) {
        size_t used = 0;
        std::stod(fields[1], &used);
        EXPECT_EQ(used, fields[1].size()) << submission[i];
      } else {
        EXPECT_EQ(c.labels.count(fields[1]), 1u) << c.task << ": " << submission[i];
      }
    }
  }
  // One row (the models are named after their directories), one column per task; no GLUE column, since each
  // model has one GLUE task and a "GLUE" of one task would repeat it (issue 61).
  auto result = run_command(cabert_binary() + " --threads 1 evaluate --summarize" + summary_inputs + " --format tsv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto table = tasks::split_tabs(result.out.substr(0, result.out.find('\n')));
  for (size_t i = 1; i < table.size(); ++i) {
    // One run per task (SEM 0): a task is at its floor exactly when its score does not exceed its control.
    std::string& column = table[i];
    const auto mark = column.find(" (floor)");
    if (mark != std::string::npos) column.erase(mark);
    const auto it = std::find_if(cases.begin(), cases.end(), [&](const GlueCase& c) { return c.task == column; });
    ASSERT_NE(it, cases.end()) << column;
    const auto records = read_metrics(dir_ + "/" + it->dir + "-model/metrics.cabert");
    const pb::TaskMetrics* best = best_record(records, column);
    EXPECT_EQ(mark != std::string::npos, best->score() <= best->control_score() + 1e-9)
        << column << ": score " << best->score() << ", control " << best->control_score();
  }
  EXPECT_EQ(table, (std::vector<std::string>{"model", "CoLA", "MRPC", "STS-B", "QQP", "QNLI", "RTE", "WNLI"}));
  // Header, 7 models, the controls and the truncated examples.
  EXPECT_EQ(std::count(result.out.begin(), result.out.end(), '\n'), 10);
  EXPECT_NE(result.out.find("\ncontrol\t0.0\t"), std::string::npos) << result.out;  // CoLA's MCC of a constant
  EXPECT_NE(result.out.find("\ntruncated train / dev\t"), std::string::npos) << result.out;
  // A directory stands for every metrics file below it (checkpoints are passed over): same table.
  auto from_directory = run_command(cabert_binary() + " --threads 1 evaluate --summarize " + dir_ + " --format tsv");
  ASSERT_EQ(from_directory.exit_code, 0) << from_directory.err;
  EXPECT_NE(from_directory.out.find(result.out.substr(result.out.find('\n') + 1, 20)), std::string::npos);
}

TEST_F(FinetuneCli, MnliMatchedMismatchedThenRteFromTheMnliCheckpointWithRuns) {
  // MNLI-shaped files (no MNLI is shipped): RTE sentence pairs with the three NLI labels.
  std::string task = dir_ + "/mnli";
  auto rte = lines_of(data_ + "/glue/RTE/train.tsv");
  const char* labels[] = {"entailment", "neutral", "contradiction"};
  auto write_mnli = [&](const std::string& path, size_t first, size_t count) {
    std::string text = "index\tsentence1\tsentence2\tgold_label\n";
    for (size_t i = first; i < first + count; ++i) {
      auto fields = tasks::split_tabs(rte[1 + i]);
      text += std::to_string(i) + "\t" + fields[1] + "\t" + fields[2] + "\t" + labels[i % 3] + "\n";
    }
    write_text(path, text);
  };
  write_mnli(task + "/train.tsv", 0, 48);
  write_mnli(task + "/dev_matched.tsv", 48, 12);
  write_mnli(task + "/dev_mismatched.tsv", 60, 15);
  auto result = run_command(finetune("--task MNLI --data " + task + " --model-dir " + dir_ +
                                     "/mnli-model --epochs 1 --batch-size 16 --max-length 48"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto records = read_metrics(dir_ + "/mnli-model/metrics.cabert");
  ASSERT_NE(best_record(records, "MNLI-m"), nullptr);
  ASSERT_NE(best_record(records, "MNLI-mm"), nullptr);
  EXPECT_EQ(best_record(records, "MNLI-mm")->examples(), 15u);

  // The diagnostic set (AX) is scored with an MNLI model; its submission uses the NLI label strings.
  slice(data_ + "/glue/diagnostic/diagnostic.tsv", task + "/diagnostic.tsv", true, 0, 20);
  result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + dir_ +
                       "/mnli-model/best.cabert --task AX "
                       "--data " +
                       task + "/diagnostic.tsv --predictions " + dir_ + "/ax/");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto ax = lines_of(dir_ + "/ax/AX.tsv");
  ASSERT_EQ(ax.size(), 21u);
  for (size_t i = 1; i < ax.size(); ++i) {
    std::string label = tasks::split_tabs(ax[i])[1];
    EXPECT_TRUE(label == "entailment" || label == "neutral" || label == "contradiction") << ax[i];
  }

  // RTE from the MNLI checkpoint (encoder reused, fresh two-class head), two seeds.
  std::string rte_dir = dir_ + "/rte-from-mnli";
  slice(data_ + "/glue/RTE/train.tsv", rte_dir + "/train.tsv", true, 100, 32);
  slice(data_ + "/glue/RTE/dev.tsv", rte_dir + "/dev.tsv", true, 0, 20);
  result = run_command(cabert_binary() + " --threads 1 --quiet finetune --init-from-task " + dir_ +
                       "/mnli-model/best.cabert --task RTE --data " + rte_dir + " --model-dir " + dir_ +
                       "/rte-model --epochs 1 --runs 2 --max-length 48");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("(SEM over 2 runs)"), std::string::npos) << result.out;
  EXPECT_TRUE(fs::exists(dir_ + "/rte-model/run-0/best.cabert"));
  EXPECT_TRUE(fs::exists(dir_ + "/rte-model/run-1/best.cabert"));
  EXPECT_TRUE(fs::exists(dir_ + "/rte-model/best.cabert"));
  records = read_metrics(dir_ + "/rte-model/metrics.cabert");
  ASSERT_NE(best_record(records, "RTE", 0), nullptr);
  ASSERT_NE(best_record(records, "RTE", 1), nullptr);
  EXPECT_NE(best_record(records, "RTE", 0)->seed(), best_record(records, "RTE", 1)->seed());
  // The printed best and mean +- SEM are those of the two runs' best-epoch scores.
  double a = best_record(records, "RTE", 0)->score(), b = best_record(records, "RTE", 1)->score();
  char expected[160];
  std::snprintf(expected, sizeof expected, "RTE dev: best %.2f (run %d), mean %.2f +- %.2f (SEM over 2 runs)",
                std::max(a, b), a >= b ? 1 : 2, (a + b) / 2, std::abs(a - b) / 2);
  EXPECT_NE(result.out.find(expected), std::string::npos) << result.out << "\nexpected: " << expected;
  // --init-from-task wants a fine-tuned checkpoint, --init with it is ambiguous.
  result = run_command(cabert_binary() + " --threads 1 finetune --init-from-task " + dir_ +
                       "/mnli-model/best.cabert --preset "
                       "bert-tiny-absolute --task RTE --data " +
                       rte_dir + " --model-dir " + dir_ + "/x");
  EXPECT_EQ(result.exit_code, 2) << result.err;

  result = run_command(cabert_binary() + " --threads 1 evaluate --summarize " + dir_ + "/rte-model/metrics.cabert " +
                       dir_ + "/mnli-model/metrics.cabert --format json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto json = nlohmann::json::parse(result.out);
  EXPECT_EQ(json["models"][0]["model"], "rte-model");
  EXPECT_EQ(json["models"][0]["tasks"]["RTE"]["runs"], 2);
  // MNLI-m and MNLI-mm are one GLUE task: no GLUE score of it alone.
  EXPECT_FALSE(json["models"][1].contains("glue_tasks")) << json["models"][1];
}

TEST_F(FinetuneCli, SquadV1AndV2OnXquadSlices) {
  auto squad = nlohmann::json::parse(read_text(data_ + "/squad/xquad/xquad.en.json"));
  auto write_subset = [&](const std::string& path, size_t first_article, size_t paragraphs, bool impossible) {
    nlohmann::json out;
    out["version"] = impossible ? "v2.0" : "1.1";
    out["data"] = nlohmann::json::array();
    auto article = squad["data"][first_article];
    article["paragraphs"] = nlohmann::json(
        std::vector<nlohmann::json>(article["paragraphs"].begin(), article["paragraphs"].begin() + paragraphs));
    if (impossible) {
      // Every third question becomes unanswerable.
      size_t k = 0;
      for (auto& paragraph : article["paragraphs"]) {
        for (auto& qa : paragraph["qas"]) {
          qa["is_impossible"] = k % 3 == 0;
          if (k++ % 3 == 0) qa["answers"] = nlohmann::json::array();
        }
      }
    }
    out["data"].push_back(article);
    write_text(path, out.dump());
  };
  for (bool v2 : {false, true}) {
    std::string dir = dir_ + (v2 ? "/squad2" : "/squad1");
    write_subset(dir + "/train.json", 0, 3, v2);
    write_subset(dir + "/dev.json", 1, 2, v2);
    std::string model = dir + "-model";
    auto result = run_command(finetune(std::string("--task ") + (v2 ? "squad2.0" : "squad1.1") + " --data " + dir +
                                       " --model-dir " + model +
                                       " --epochs 1 --max-length 96 --doc-stride 32 "
                                       "--batch-size 16"));
    ASSERT_EQ(result.exit_code, 0) << result.err;
    std::string name = v2 ? "SQuAD2.0" : "SQuAD1.1";
    auto records = read_metrics(model + "/metrics.cabert");
    const pb::TaskMetrics* best = best_record(records, name);
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(best->metrics().count("exact"), 1u);
    EXPECT_EQ(best->metrics().count("f1"), 1u);
    EXPECT_EQ(best->metrics().count("no_answer_exact"), v2 ? 1u : 0u);
    EXPECT_GE(best->metrics().at("f1"), best->metrics().at("exact"));

    result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + model + "/best.cabert --data " +
                         dir + "/dev.json --predictions " + dir + "/predictions.json");
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto predictions = nlohmann::json::parse(read_text(dir + "/predictions.json"));
    auto dev = nlohmann::json::parse(read_text(dir + "/dev.json"));
    size_t questions = 0;
    for (const auto& paragraph : dev["data"][0]["paragraphs"]) {
      for (const auto& qa : paragraph["qas"]) {
        ++questions;
        ASSERT_TRUE(predictions.contains(qa["id"].get<std::string>()));
        // A non-empty answer is a piece of the context.
        std::string answer = predictions[qa["id"].get<std::string>()];
        EXPECT_NE(paragraph["context"].get<std::string>().find(answer), std::string::npos) << answer;
      }
    }
    EXPECT_EQ(predictions.size(), questions);
  }
}

TEST_F(FinetuneCli, GenericCsvClassificationWithColumnOptions) {
  std::string dir = dir_ + "/generic";
  auto sst = lines_of(data_ + "/glue/SST-2/train.tsv");
  auto write_csv = [&](const std::string& path, size_t first, size_t count) {
    std::string text = "id,review,sentiment\n";
    for (size_t i = first; i < first + count; ++i) {
      auto fields = tasks::split_tabs(sst[1 + i]);
      std::string quoted = "\"";
      for (char c : fields[0]) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      text.append("r").append(std::to_string(i)).append(",").append(quoted).append("\",");
      text.append(fields[1] == "1" ? "pos" : "neg").append("\n");
    }
    write_text(path, text);
  };
  write_csv(dir + "/train.csv", 0, 64);
  write_csv(dir + "/dev.csv", 64, 24);
  auto result = run_command(finetune("--task reviews --data " + dir +
                                     " --text-column review --label-column "
                                     "sentiment --id-column id --model-dir " +
                                     dir_ +
                                     "/generic-model --epochs 1 "
                                     "--max-length 48"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto records = read_metrics(dir_ + "/generic-model/metrics.cabert");
  const pb::TaskMetrics* best = best_record(records, "reviews");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->metrics().count("macro_f1"), 1u);
  result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + dir_ +
                       "/generic-model/best.cabert --data " + dir + "/dev.csv --predictions " + dir + "/p.tsv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto predictions = lines_of(dir + "/p.tsv");
  ASSERT_EQ(predictions.size(), 25u);
  EXPECT_EQ(tasks::split_tabs(predictions[1])[0], "r64");
  std::string label = tasks::split_tabs(predictions[1])[1];
  EXPECT_TRUE(label == "neg" || label == "pos");
  // An unlabelled file: --label-column "" gives id + prediction rows.
  write_text(dir + "/test.csv", "id,review\nt1,a gorgeous film\nt2,\"dull, dull, dull\"\n");
  result = run_command(cabert_binary() + " --threads 1 --quiet evaluate --model " + dir_ +
                       "/generic-model/best.cabert --data " + dir + "/test.csv --label-column '' --predictions " + dir +
                       "/test-predictions.tsv");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto unlabeled = lines_of(dir + "/test-predictions.tsv");
  ASSERT_EQ(unlabeled.size(), 3u);
  EXPECT_EQ(unlabeled[0], "index\tprediction");
  EXPECT_EQ(tasks::split_tabs(unlabeled[2])[0], "t2");
}

TEST_F(FinetuneCli, GenericJsonlRegression) {
  std::string dir = dir_ + "/generic-regression";
  auto sts = lines_of(data_ + "/glue/STS-B/train.tsv");
  auto write_jsonl = [&](const std::string& path, size_t first, size_t count) {
    std::string text;
    for (size_t i = first; i < first + count; ++i) {
      auto f = tasks::split_tabs(sts[1 + i]);
      nlohmann::json row = {{"a", f[7]}, {"b", f[8]}, {"score", std::stod(f[9])}};
      text += row.dump() + "\n";
    }
    write_text(path, text);
  };
  write_jsonl(dir + "/train.jsonl", 0, 48);
  write_jsonl(dir + "/dev.jsonl", 48, 20);
  auto result = run_command(finetune("--task similarity --regression --data " + dir +
                                     " --text-column a "
                                     "--text-pair-column b --label-column score --model-dir " +
                                     dir_ + "/regression-model --epochs 1 --max-length 48"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto records = read_metrics(dir_ + "/regression-model/metrics.cabert");
  const pb::TaskMetrics* best = best_record(records, "similarity");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->metrics().count("pearson"), 1u);
  EXPECT_EQ(best->metrics().count("spearman"), 1u);
  EXPECT_NEAR(best->score(), 50 * (best->metrics().at("pearson") + best->metrics().at("spearman")), 1e-9);
}

TEST_F(FinetuneCli, InitFromAPretrainingCheckpoint) {
  std::string corpus = dir_ + "/corpus";
  auto result = run_command(cabert_binary() + " --threads 1 --quiet build-corpus -m " + dir_ + "/tok.model -i " + dir_ +
                            "/text.txt --max-length 48 -o " + corpus);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  result = run_command(cabert_binary() + " --threads 1 --seed 7 --quiet pretrain --preset bert-tiny-absolute --corpus " +
                       corpus + " --model-dir " + dir_ +
                       "/pretrain --steps 4 --batch-size 8 --save-every 0 "
                       "--eval-examples 8");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::string checkpoint;
  for (const auto& entry : fs::directory_iterator(dir_ + "/pretrain")) {
    if (entry.path().filename().string().rfind("checkpoint-", 0) == 0) checkpoint = entry.path().string();
  }
  ASSERT_FALSE(checkpoint.empty());
  std::string rte = dir_ + "/init-rte";
  slice(data_ + "/glue/RTE/train.tsv", rte + "/train.tsv", true, 0, 24);
  slice(data_ + "/glue/RTE/dev.tsv", rte + "/dev.tsv", true, 0, 8);
  // Every encoder tensor must be found in the checkpoint (restore_module refuses otherwise).
  result = run_command(cabert_binary() + " --threads 1 --quiet finetune --init " + checkpoint + " --task RTE --data " +
                       rte + " --model-dir " + dir_ + "/init-rte-model --epochs 1 --max-length 48");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::exists(dir_ + "/init-rte-model/best.cabert"));
  // Every dev record names the pre-training run it started from (the summary's mean over pre-training seeds).
  auto records = read_metrics(dir_ + "/init-rte-model/metrics.cabert");
  const pb::TaskMetrics* best = best_record(records, "RTE");
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->pretrain_run(), fs::absolute(checkpoint).lexically_normal().string());
  EXPECT_EQ(best->pretrain_seed(), 7u);
  // A pre-training checkpoint is not something `evaluate` can score.
  result = run_command(cabert_binary() + " --threads 1 evaluate --model " + checkpoint + " --data " + rte + "/dev.tsv");
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("expected a fine-tuned checkpoint"), std::string::npos) << result.err;
}

TEST_F(FinetuneCli, BadInputExitsThreeWithAClearMessage) {
  std::string rte = dir_ + "/bad-rte";
  slice(data_ + "/glue/RTE/train.tsv", rte + "/train.tsv", true, 0, 16);
  slice(data_ + "/glue/RTE/dev.tsv", rte + "/dev.tsv", true, 0, 8);
  // A label outside the task's label set.
  std::string bad = rte + "-label";
  fs::create_directories(bad);
  fs::copy_file(rte + "/train.tsv", bad + "/train.tsv");
  std::string dev = read_text(rte + "/dev.tsv");
  size_t at = dev.rfind("not_entailment");
  if (at == std::string::npos) at = dev.rfind("entailment");
  write_text(bad + "/dev.tsv", dev.substr(0, at) + "maybe" + dev.substr(dev.find('\n', at)));
  auto result = run_command(finetune("--task RTE --data " + bad + " --model-dir " + dir_ + "/bad1"));
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("label 'maybe' is not one of {entailment, not_entailment}"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find(bad + "/dev.tsv:"), std::string::npos) << result.err;

  // Columns that do not match the task: RTE files given as SST-2.
  result = run_command(finetune("--task SST-2 --data " + rte + " --model-dir " + dir_ + "/bad2"));
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("SST-2 expects columns sentence"), std::string::npos) << result.err;

  // An empty dev set.
  std::string empty = rte + "-empty";
  fs::create_directories(empty);
  fs::copy_file(rte + "/train.tsv", empty + "/train.tsv");
  write_text(empty + "/dev.tsv", lines_of(rte + "/dev.tsv")[0] + "\n");
  result = run_command(finetune("--task RTE --data " + empty + " --model-dir " + dir_ + "/bad3"));
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("empty dev set"), std::string::npos) << result.err;

  // A checkpoint whose tokenizer does not match the given one.
  result = run_command(finetune("--task RTE --data " + rte + " --model-dir " + dir_ +
                                "/rte-ok --epochs 1 "
                                "--max-length 32"));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  result = run_command(cabert_binary() + " --threads 1 tokenize train -i " + dir_ +
                       "/text.txt --vocab-size 300 --sentinels 4 "
                       "--model-prefix " +
                       dir_ + "/other");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  result = run_command(cabert_binary() + " --threads 1 evaluate --model " + dir_ + "/rte-ok/best.cabert --tokenizer " +
                       dir_ + "/other.model --data " + rte + "/dev.tsv");
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("the checkpoint was trained with tokenizer"), std::string::npos) << result.err;
  result = run_command(cabert_binary() + " --threads 1 finetune --init-from-task " + dir_ +
                       "/rte-ok/best.cabert --tokenizer " + dir_ + "/other.model --task RTE --data " + rte +
                       " --model-dir " + dir_ + "/bad4");
  EXPECT_EQ(result.exit_code, 3) << result.err;

  // --max-length beyond the model's max_length, for a relative-position encoder too: refused at the start (its
  // embeddings take no more), not after the first long batch.
  result = run_command(cabert_binary() +
                       " --threads 1 --quiet finetune --preset bert-tiny-composite --set max_length=64 "
                       "--tokenizer " +
                       dir_ + "/tok.model --task RTE --data " + rte + " --model-dir " + dir_ + "/bad5 --max-length 96");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("--max-length 96: the model takes at most 64 positions (its max_length)"),
            std::string::npos)
      << result.err;

  // A pre-training-free file that is not a checkpoint at all, and a summary of the wrong record type.
  result = run_command(cabert_binary() + " --threads 1 evaluate --summarize " + dir_ + "/rte-ok/best.cabert");
  EXPECT_EQ(result.exit_code, 3) << result.err;
}

}  // namespace
}  // namespace cabert
