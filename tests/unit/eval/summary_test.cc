#include "lib/eval/summary.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <optional>

#include "lib/core/errors.h"
#include "lib/eval/task_score.h"

namespace cabert::eval {
namespace {

pb::TaskMetrics record(const std::string& model, const std::string& task, std::map<std::string, double> metrics,
                       pb::TaskMetrics::Kind kind = pb::TaskMetrics::BEST_OF_RUN) {
  pb::TaskMetrics r;
  r.set_model(model);
  r.set_task(task);
  r.set_kind(kind);
  for (const auto& [k, v] : metrics) (*r.mutable_metrics())[k] = v;
  r.set_score(task_score(task, metrics));
  return r;
}

TEST(TaskScore, LeaderboardRules) {
  EXPECT_DOUBLE_EQ(task_score("CoLA", {{"mcc", 0.5}, {"accuracy", 0.8}}), 50.0);
  EXPECT_DOUBLE_EQ(task_score("MRPC", {{"f1", 0.9}, {"accuracy", 0.8}}), 85.0);
  EXPECT_DOUBLE_EQ(task_score("STS-B", {{"pearson", 0.8}, {"spearman", 0.7}}), 75.0);
  EXPECT_DOUBLE_EQ(task_score("SST-2", {{"accuracy", 0.9}}), 90.0);
  EXPECT_DOUBLE_EQ(task_score("SQuAD1.1", {{"exact", 0.7}, {"f1", 0.8}}), 80.0);
  EXPECT_THROW(task_score("CoLA", {{"accuracy", 0.8}}), Error);
}

TEST(TaskScore, GlueScoreAveragesMnliAndSkipsWnli) {
  // MNLI = (80 + 82) / 2 = 81; mean of CoLA 50, SST-2 90, MNLI 81 = 221 / 3.
  std::map<std::string, double> scores = {{"CoLA", 50},    {"SST-2", 90}, {"MNLI-m", 80},
                                          {"MNLI-mm", 82}, {"WNLI", 10},  {"imdb", 99}};
  GlueScore glue = glue_score(scores);
  EXPECT_NEAR(glue.score, 221.0 / 3, 1e-12);
  EXPECT_EQ(glue.tasks, (std::vector<std::string>{"CoLA", "SST-2", "MNLI-m", "MNLI-mm"}));
  EXPECT_EQ(glue.task_count, 3);  // MNLI-m and MNLI-mm are one task
  EXPECT_NEAR(glue_score(scores, /*with_wnli=*/true).score, 231.0 / 4, 1e-12);
}

TEST(Summary, TableRowsModelsColumnsTasksWithRunsAggregated) {
  std::vector<pb::TaskMetrics> records = {
      record("small", "SST-2", {{"accuracy", 0.80}}),
      record("small", "SST-2", {{"accuracy", 0.84}}),
      record("small", "SST-2", {{"accuracy", 0.10}}, pb::TaskMetrics::EPOCH),  // ignored
      record("small", "CoLA", {{"mcc", 0.30}}),
      record("base", "CoLA", {{"mcc", 0.50}}),
      record("base", "imdb", {{"accuracy", 0.70}, {"macro_f1", 0.69}}),
  };
  SummaryOptions options;
  SummaryTable table = summarize(records, options);
  EXPECT_EQ(table.models, (std::vector<std::string>{"small", "base"}));
  EXPECT_EQ(table.tasks, (std::vector<std::string>{"CoLA", "SST-2", "imdb"}));
  const SummaryCell& sst = table.cells["small"]["SST-2"];
  EXPECT_EQ(sst.runs, 2u);
  EXPECT_NEAR(sst.score, 82.0, 1e-9);
  EXPECT_NEAR(sst.sem, 2.0, 1e-9);  // sd of {80, 84} = 2.83, / sqrt(2) = 2
  EXPECT_NEAR(table.glue["small"], (30.0 + 82.0) / 2, 1e-9);
  EXPECT_EQ(table.glue.count("base"), 0u);  // CoLA alone: a "GLUE" of one task would repeat it

  EXPECT_EQ(render_summary(table, SummaryFormat::kMarkdown, options),
            "| model | CoLA | SST-2 | imdb | GLUE |\n"
            "|---|---:|---:|---:|---:|\n"
            "| small | 30.0 | 82.0 ± 2.0 | - | 56.0 |\n"
            "| base | 50.0 | - | 70.0 | - |\n"
            "\nGLUE: mean of the task scores over CoLA, SST-2 (MNLI-m/-mm count as one task; "
            "WNLI left out; MRPC/QQP: mean of F1 and accuracy; STS-B: mean of Pearson and Spearman)\n");
  EXPECT_EQ(render_summary(table, SummaryFormat::kTsv, options), "model\tCoLA\tSST-2\timdb\tGLUE\n"
                                                                 "small\t30.0\t82.0 +- 2.0\t-\t56.0\n"
                                                                 "base\t50.0\t-\t70.0\t-\n");
  auto json = nlohmann::json::parse(render_summary(table, SummaryFormat::kJson, options));
  EXPECT_EQ(json["models"][1]["model"], "base");
  EXPECT_NEAR(json["models"][0]["tasks"]["SST-2"]["score"].get<double>(), 82.0, 1e-9);
  EXPECT_NEAR(json["models"][1]["tasks"]["imdb"]["metrics"]["macro_f1"].get<double>(), 0.69, 1e-9);

  // A second record of the same checkpoint (evaluation after fine-tuning) replaces the first.
  std::vector<pb::TaskMetrics> twice = {record("m", "RTE", {{"accuracy", 0.6}}),
                                        record("m", "RTE", {{"accuracy", 0.7}}, pb::TaskMetrics::EVALUATION)};
  twice[0].set_checkpoint("/x/best.cabert");
  twice[1].set_checkpoint("/x/best.cabert");
  SummaryTable deduplicated = summarize(twice, options);
  EXPECT_EQ(deduplicated.cells["m"]["RTE"].runs, 1u);
  EXPECT_NEAR(deduplicated.cells["m"]["RTE"].score, 70.0, 1e-9);

  options.aggregate = RunAggregate::kBest;
  SummaryTable best = summarize(records, options);
  EXPECT_NEAR(best.cells["small"]["SST-2"].score, 84.0, 1e-9);
}

// Several pre-training runs: the mean of each run's fine-tuning means, and the SEM over those means.
TEST(Summary, PretrainingSeedsMeanOfMeansAndTheirSem) {
  auto from = [](const std::string& pretrain_run, double accuracy) {
    pb::TaskMetrics r = record("m", "SST-2", {{"accuracy", accuracy}});
    r.set_pretrain_run(pretrain_run);
    return r;
  };
  std::vector<pb::TaskMetrics> records = {from("/pt/1", 0.80), from("/pt/1", 0.84), from("/pt/2", 0.70),
                                          from("/pt/2", 0.74), from("/pt/3", 0.90)};
  records.push_back(record("m", "CoLA", {{"mcc", 0.30}}));  // an older record: one pre-training run
  records.push_back(record("m", "CoLA", {{"mcc", 0.20}}));
  SummaryOptions options;
  SummaryTable table = summarize(records, options);
  const SummaryCell& sst = table.cells["m"]["SST-2"];
  // Means of the pre-training runs {82, 72, 90}: mean 244 / 3; deviations 2/3, -28/3, 26/3, squares summed
  // 1464 / 9, variance / 2 = 732 / 9, SEM = sqrt(732 / 27).
  EXPECT_EQ(sst.runs, 5u);
  EXPECT_EQ(sst.pretrain_runs, 3u);
  EXPECT_NEAR(sst.score, 244.0 / 3, 1e-9);
  EXPECT_NEAR(sst.sem, std::sqrt(732.0 / 27), 1e-9);
  EXPECT_NEAR(sst.best, 90.0, 1e-9);
  EXPECT_NEAR(sst.metrics.at("accuracy"), 244.0 / 300, 1e-12);
  const SummaryCell& cola = table.cells["m"]["CoLA"];
  EXPECT_EQ(cola.pretrain_runs, 1u);
  EXPECT_NEAR(cola.sem, 5.0, 1e-9);  // over the fine-tuning runs, as before
  EXPECT_EQ(render_summary(table, SummaryFormat::kMarkdown, options),
            "| model | CoLA | SST-2 | GLUE |\n"
            "|---|---:|---:|---:|\n"
            "| m | 25.0 ± 5.0 | 81.3 ± 5.2 | 53.2 |\n"
            "\nGLUE: mean of the task scores over CoLA, SST-2 (MNLI-m/-mm count as one task; WNLI left out; "
            "MRPC/QQP: mean of F1 and accuracy; STS-B: mean of Pearson and Spearman); cells: mean ± SEM over the "
            "pre-training seeds (up to 3; each seed's fine-tuning runs averaged first), or over the fine-tuning "
            "runs where a row has one pre-training run or none\n");
  auto json = nlohmann::json::parse(render_summary(table, SummaryFormat::kJson, options));
  EXPECT_EQ(json["models"][0]["tasks"]["SST-2"]["pretrain_runs"], 3);
}

// A "GLUE" of one task repeats that task's score: the column needs two GLUE tasks (MNLI-m/-mm are one).
TEST(Summary, OneGlueTaskGetsNoGlueColumn) {
  SummaryOptions options;
  for (const auto& tasks : std::vector<std::vector<std::string>>{{"SST-2"}, {"MNLI-m", "MNLI-mm"}}) {
    std::vector<pb::TaskMetrics> records;
    for (const auto& task : tasks) records.push_back(record("m", task, {{"accuracy", 0.8}}));
    records.push_back(record("m", "imdb", {{"accuracy", 0.7}, {"macro_f1", 0.7}}));
    const SummaryTable table = summarize(records, options);
    EXPECT_TRUE(table.glue.empty()) << tasks.front();
    EXPECT_EQ(render_summary(table, SummaryFormat::kMarkdown, options).find("GLUE"), std::string::npos)
        << tasks.front();
  }
  std::vector<pb::TaskMetrics> two = {record("m", "SST-2", {{"accuracy", 0.8}}),
                                      record("m", "RTE", {{"accuracy", 0.6}})};
  EXPECT_NEAR(summarize(two, options).glue.at("m"), 70.0, 1e-9);
  two.push_back(record("n", "SST-2", {{"accuracy", 0.7}}));
  two.push_back(record("n", "CoLA", {{"mcc", 0.2}}));
  EXPECT_NE(render_summary(summarize(two, options), SummaryFormat::kMarkdown, options)
                .find("GLUE: mean of the task scores over the GLUE tasks each model has"),
            std::string::npos);
}

TEST(Summary, MeanAndBestIsThePapersLayout) {
  std::vector<pb::TaskMetrics> records = {
      record("composite", "SST-2", {{"accuracy", 0.80}}),
      record("composite", "SST-2", {{"accuracy", 0.84}}),
      record("composite", "CoLA", {{"mcc", 0.30}}),
      record("composite", "CoLA", {{"mcc", 0.20}}),
  };
  SummaryOptions options;
  options.aggregate = parse_run_aggregate("mean-best");
  SummaryTable table = summarize(records, options);
  // GLUE of the means (25 + 82) / 2 = 53.5; of the best runs (30 + 84) / 2 = 57.
  EXPECT_NEAR(table.glue["composite"], 53.5, 1e-9);
  EXPECT_NEAR(table.glue_best["composite"], 57.0, 1e-9);
  EXPECT_EQ(render_summary(table, SummaryFormat::kMarkdown, options),
            "| model | CoLA | SST-2 | GLUE |\n"
            "|---|---:|---:|---:|\n"
            "| composite | 25.0 ± 5.0 (30.0) | 82.0 ± 2.0 (84.0) | 53.5 (57.0) |\n"
            "\nGLUE: mean of the task scores over CoLA, SST-2 (MNLI-m/-mm count as one task; WNLI left out; "
            "MRPC/QQP: mean of F1 and accuracy; STS-B: mean of Pearson and Spearman); cells: mean ± SEM over the "
            "runs (best run)\n");
  auto json = nlohmann::json::parse(render_summary(table, SummaryFormat::kJson, options));
  EXPECT_EQ(json["aggregate"], "mean-best");
  EXPECT_NEAR(json["models"][0]["tasks"]["CoLA"]["best"].get<double>(), 30.0, 1e-9);
  EXPECT_NEAR(json["models"][0]["glue_best"].get<double>(), 57.0, 1e-9);
  EXPECT_THROW(parse_run_aggregate("median"), UsageError);
}

// A run whose dev score is NaN (STS-B's correlations of constant predictions) failed: it never ranks above a
// number, and the mean over runs is over the others.
TEST(Summary, NanScoresRankBelowNumbersAndLeaveTheMean) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(better_score(1.0, nan));
  EXPECT_FALSE(better_score(nan, 1.0));
  EXPECT_FALSE(better_score(nan, nan));
  EXPECT_TRUE(better_score(2.0, 1.0));
  EXPECT_FALSE(better_score(1.0, 1.0));
  std::vector<pb::TaskMetrics> records = {
      record("m", "STS-B", {{"pearson", nan}, {"spearman", nan}}),
      record("m", "STS-B", {{"pearson", 0.80}, {"spearman", 0.70}}),
      record("m", "STS-B", {{"pearson", 0.60}, {"spearman", 0.50}}),
      record("only-nan", "STS-B", {{"pearson", nan}, {"spearman", nan}}),
      record("only-nan", "STS-B", {{"pearson", nan}, {"spearman", nan}}),
  };
  SummaryOptions options;
  options.aggregate = RunAggregate::kMeanAndBest;
  SummaryTable table = summarize(records, options);
  const SummaryCell& cell = table.cells["m"]["STS-B"];
  EXPECT_EQ(cell.runs, 3u);
  EXPECT_NEAR(cell.score, 65.0, 1e-9);  // mean of 75 and 55
  EXPECT_NEAR(cell.best, 75.0, 1e-9);
  EXPECT_TRUE(std::isnan(table.cells["only-nan"]["STS-B"].score));
}

}  // namespace
}  // namespace cabert::eval

namespace cabert::eval {
namespace {

SummaryCell cell(double mean, double sem, std::optional<double> control) {
  SummaryCell out;
  out.score = out.mean = mean;
  out.sem = sem;
  out.control = control;
  return out;
}

// At the floor: no row more than one SEM above its control (mean - control <= SEM).
TEST(SummaryFloor, EveryRowWithinOneSemAboveItsControl) {
  const SummaryCell within = cell(75.2, 0.8, 74.8), above = cell(75.8, 0.2, 74.8), below = cell(60.0, 0.1, 74.8);
  EXPECT_TRUE(at_floor({&within}));
  EXPECT_FALSE(at_floor({&within, &above}));  // 1.0 above with SEM 0.2: one row learned something
  EXPECT_TRUE(at_floor({&within, &below}));   // far below the control is not above it
  // One run, SEM 0: at the floor only at or below the control.
  const SummaryCell equal = cell(74.8, 0, 74.8), just_above = cell(74.9, 0, 74.8);
  EXPECT_TRUE(at_floor({&equal}));
  EXPECT_FALSE(at_floor({&just_above}));
  // A row without a control cannot be judged; a failed row (NaN) is not above its control; no rows, no floor.
  const SummaryCell no_control = cell(74.8, 0, std::nullopt);
  const SummaryCell failed = cell(std::numeric_limits<double>::quiet_NaN(), 0, 74.8);
  EXPECT_FALSE(at_floor({&within, &no_control}));
  EXPECT_TRUE(at_floor({&within, &failed}));
  EXPECT_FALSE(at_floor({}));
}

pb::TaskMetrics controlled(const std::string& model, const std::string& task, std::map<std::string, double> metrics,
                           double control) {
  pb::TaskMetrics r = record(model, task, std::move(metrics));
  r.set_control_score(control);
  r.set_control("the majority training label '1' (40 of 64) everywhere");
  return r;
}

// A table with each task's control under the rows, MRPC at its floor (74.5 +- 0.5 against 74.8) and marked, and
// the GLUE score with and without it; CoLA 25 +- 5 and SST-2 82 +- 2 are far above their controls 0 and 51.
TEST(SummaryFloor, ControlRowFloorMarkAndTwoGlueScores) {
  std::vector<pb::TaskMetrics> records = {
      controlled("m", "CoLA", {{"mcc", 0.30}}, 0.0),
      controlled("m", "CoLA", {{"mcc", 0.20}}, 0.0),
      controlled("m", "SST-2", {{"accuracy", 0.80}}, 51.0),
      controlled("m", "SST-2", {{"accuracy", 0.84}}, 51.0),
      controlled("m", "MRPC", {{"f1", 0.81}, {"accuracy", 0.69}}, 74.8),  // 75.0
      controlled("m", "MRPC", {{"f1", 0.80}, {"accuracy", 0.68}}, 74.8),  // 74.0
  };
  for (auto& r : records) {
    if (r.task() == "CoLA") {
      r.set_train_truncated(2);
      r.set_train_examples(64);
      r.set_dev_truncated(1);
      r.set_examples(100);
    } else if (r.task() == "SST-2") {
      r.set_train_truncated(0);
      r.set_train_examples(64);
      r.set_dev_truncated(0);
      r.set_examples(50);
    }
  }
  SummaryOptions options;
  SummaryTable table = summarize(records, options);
  EXPECT_EQ(table.floor_tasks, (std::vector<std::string>{"MRPC"}));
  EXPECT_NEAR(table.cells["m"]["MRPC"].mean, 74.5, 1e-9);
  EXPECT_NEAR(table.cells["m"]["MRPC"].sem, 0.5, 1e-9);
  EXPECT_NEAR(table.glue["m"], (25.0 + 82.0 + 74.5) / 3, 1e-9);  // 60.5
  EXPECT_NEAR(table.glue_without_floor["m"], (25.0 + 82.0) / 2, 1e-9);
  EXPECT_EQ(table.glue_tasks_without_floor["m"], (std::vector<std::string>{"CoLA", "SST-2"}));
  EXPECT_NEAR(*table.control_glue, (0.0 + 51.0 + 74.8) / 3, 1e-9);  // 41.93
  EXPECT_NEAR(*table.control_glue_without_floor, 25.5, 1e-9);
  const std::string markdown = render_summary(table, SummaryFormat::kMarkdown, options);
  EXPECT_EQ(markdown.substr(0, markdown.find("\n\n")),
            "| model | CoLA | SST-2 | MRPC (floor) | GLUE | GLUE w/o floor |\n"
            "|---|---:|---:|---:|---:|---:|\n"
            "| m | 25.0 ± 5.0 | 82.0 ± 2.0 | 74.5 ± 0.5 | 60.5 | 53.5 |\n"
            "| control | 0.0 | 51.0 | 74.8 | 41.9 | 25.5 |\n"
            "| truncated train / dev | 2 of 64 / 1 of 100 | 0 of 64 / 0 of 50 | - / - | - | - |");
  for (const char* note : {"GLUE w/o floor: the same without MRPC",
                           "(floor): the task is at its floor: no row's mean is more than one SEM above the control",
                           "MRPC: the majority training label '1' (40 of 64) everywhere",
                           "Truncated train / dev: examples longer than the maximum length before truncation"}) {
    EXPECT_NE(markdown.find(note), std::string::npos) << note << " in " << markdown;
  }
  EXPECT_EQ(render_summary(table, SummaryFormat::kTsv, options),
            "model\tCoLA\tSST-2\tMRPC (floor)\tGLUE\tGLUE w/o floor\n"
            "m\t25.0 +- 5.0\t82.0 +- 2.0\t74.5 +- 0.5\t60.5\t53.5\n"
            "control\t0.0\t51.0\t74.8\t41.9\t25.5\n"
            "truncated train / dev\t2 of 64 / 1 of 100\t0 of 64 / 0 of 50\t- / -\t-\t-\n");
  auto json = nlohmann::json::parse(render_summary(table, SummaryFormat::kJson, options));
  EXPECT_EQ(json["floor_tasks"], nlohmann::json::array({"MRPC"}));
  EXPECT_NEAR(json["models"][0]["glue_without_floor"].get<double>(), 53.5, 1e-9);
  EXPECT_NEAR(json["controls"]["MRPC"]["low"].get<double>(), 74.8, 1e-9);
  EXPECT_EQ(json["models"][0]["tasks"]["CoLA"]["train_truncated"], 2);

  // A second row 0.8 above MRPC's control (75.6) with SEM 0.2 lifts it off the floor: one GLUE column, no mark.
  records.push_back(controlled("n", "MRPC", {{"f1", 0.82}, {"accuracy", 0.696}}, 74.8));  // 75.8
  records.push_back(controlled("n", "MRPC", {{"f1", 0.82}, {"accuracy", 0.688}}, 74.8));  // 75.4
  records.push_back(controlled("n", "SST-2", {{"accuracy", 0.80}}, 51.0));
  table = summarize(records, options);
  EXPECT_NEAR(table.cells["n"]["MRPC"].sem, 0.2, 1e-9);
  EXPECT_TRUE(table.floor_tasks.empty());
  EXPECT_TRUE(table.glue_without_floor.empty());
  const std::string lifted = render_summary(table, SummaryFormat::kMarkdown, options);
  EXPECT_EQ(lifted.find("(floor) |"), std::string::npos) << lifted;
  EXPECT_EQ(lifted.find("w/o floor"), std::string::npos) << lifted;
  EXPECT_NE(lifted.find("No task is at its floor"), std::string::npos) << lifted;
}

// Records without controls (older ones, translation) keep the table as it was: no control or truncated row.
TEST(SummaryFloor, RecordsWithoutControlsAddNoRows) {
  std::vector<pb::TaskMetrics> records = {record("m", "SST-2", {{"accuracy", 0.8}}),
                                          record("m", "CoLA", {{"mcc", 0.3}})};
  SummaryOptions options;
  const SummaryTable table = summarize(records, options);
  EXPECT_TRUE(table.controls.empty());
  EXPECT_TRUE(table.floor_tasks.empty());
  const std::string markdown = render_summary(table, SummaryFormat::kMarkdown, options);
  EXPECT_EQ(markdown.find("control"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("truncated"), std::string::npos) << markdown;
}

}  // namespace
}  // namespace cabert::eval
