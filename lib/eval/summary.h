// `cabert evaluate --summarize`: metrics records -> one table, models as rows and tasks as columns, with the
// GLUE score, the layout of the papers' tables; below the models, each task's control (the score of a prediction
// that ignores its input) and its truncated examples, and the tasks at their floor marked (docs/training.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formats/task.pb.h"

namespace cabert::eval {

enum class SummaryFormat { kMarkdown, kTsv, kJson };
SummaryFormat parse_summary_format(const std::string& name);  // "markdown"/"md", "tsv", "json"; UsageError else

// kMeanAndBest is the layout of the papers' appendix tables: "mean ± SEM (best)", and the GLUE score of the
// means next to the GLUE score of the best runs.
enum class RunAggregate { kMean, kBest, kMeanAndBest };
RunAggregate parse_run_aggregate(const std::string& name);  // "mean", "best" or "mean-best"

struct SummaryOptions {
  RunAggregate aggregate = RunAggregate::kMean;
  bool glue_with_wnli = false;
  int decimals = 1;
};

struct SummaryCell {
  double score = 0;  // percent: the mean over runs; the best run's score for kBest
  double mean = 0;   // the mean over runs (every aggregate), and its SEM (0 for one record)
  double sem = 0;
  double best = 0;   // the best run's score (every aggregate)
  uint64_t runs = 0;           // fine-tuning runs, over every pre-training run
  uint64_t pretrain_runs = 1;  // distinct pre-training runs (TaskMetrics.pretrain_run); several: sem is over them
  std::map<std::string, double> metrics;  // aggregated like the score
  // TaskMetrics.control_score of its records; where they have none (evaluate's records), the task's control
  // when every row that has one agrees.
  std::optional<double> control;
  // TaskMetrics.train_truncated / train_examples / dev_truncated / examples of its first record that has them.
  std::optional<uint64_t> train_truncated, train_examples, dev_truncated, dev_examples;
};

// A task's control over the rows: the lowest and highest of the rows' controls (one value when they agree),
// and what it predicts (TaskMetrics.control of the first record with one).
struct TaskControl {
  double low = 0, high = 0;
  std::string rule;
};

// A task is at its floor when every row that has it has a control and no row's mean is more than one SEM above
// its control: mean - control <= SEM (1e-9 allowed for rounding). A row of one run has SEM 0, so it must score at
// most its control; a row below its control counts as at the floor too, as does one whose every run failed (NaN).
bool at_floor(const std::vector<const SummaryCell*>& rows);

struct SummaryTable {
  std::vector<std::string> models;                                  // first-seen order
  std::vector<std::string> tasks;                                   // GLUE tasks in table order, then the others sorted
  std::map<std::string, std::map<std::string, SummaryCell>> cells;  // model -> task -> cell
  std::map<std::string, double> glue;                               // model -> GLUE score (when any GLUE task)
  std::map<std::string, double> glue_best;                          // model -> GLUE score of the best runs
  std::map<std::string, std::vector<std::string>> glue_tasks;       // model -> tasks averaged
  std::map<std::string, TaskControl> controls;                      // task -> control (tasks with one)
  std::vector<std::string> floor_tasks;                             // at_floor, in table order
  // The GLUE scores without the floor tasks (when one of them is in some model's GLUE): model -> score, as above.
  std::map<std::string, double> glue_without_floor, glue_best_without_floor;
  std::map<std::string, std::vector<std::string>> glue_tasks_without_floor;
  // The controls' GLUE score (from two GLUE tasks with a control on; the lowest control where rows differ),
  // with and without the floor tasks.
  std::optional<double> control_glue, control_glue_without_floor;
};

// Uses BEST_OF_RUN and EVALUATION records; per-epoch records are ignored. Several records for one model
// and task (the runs of --runs N, or repeated evaluations) are combined as `options.aggregate` says; records of
// several pre-training runs (pretrain_run) are averaged within each run first, and the SEM is over those runs.
SummaryTable summarize(const std::vector<pb::TaskMetrics>& records, const SummaryOptions& options);

std::string render_summary(const SummaryTable& table, SummaryFormat format, const SummaryOptions& options);

}  // namespace cabert::eval
