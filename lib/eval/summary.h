// `cabert evaluate --summarize`: metrics records -> one table, models as rows and tasks as columns, with the
// GLUE score, the layout of the papers' tables.
#pragma once

#include <map>
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
  double score = 0, sem = 0;  // percent; sem over runs (0 for one record); the best run's score for kBest
  double best = 0;            // the best run's score (every aggregate)
  uint64_t runs = 0;           // fine-tuning runs, over every pre-training run
  uint64_t pretrain_runs = 1;  // distinct pre-training runs (TaskMetrics.pretrain_run); several: sem is over them
  std::map<std::string, double> metrics;  // aggregated like the score
};

struct SummaryTable {
  std::vector<std::string> models;                                  // first-seen order
  std::vector<std::string> tasks;                                   // GLUE tasks in table order, then the others sorted
  std::map<std::string, std::map<std::string, SummaryCell>> cells;  // model -> task -> cell
  std::map<std::string, double> glue;                               // model -> GLUE score (when any GLUE task)
  std::map<std::string, double> glue_best;                          // model -> GLUE score of the best runs
  std::map<std::string, std::vector<std::string>> glue_tasks;       // model -> tasks averaged
};

// Uses BEST_OF_RUN and EVALUATION records; per-epoch records are ignored. Several records for one model
// and task (the runs of --runs N, or repeated evaluations) are combined as `options.aggregate` says; records of
// several pre-training runs (pretrain_run) are averaged within each run first, and the SEM is over those runs.
SummaryTable summarize(const std::vector<pb::TaskMetrics>& records, const SummaryOptions& options);

std::string render_summary(const SummaryTable& table, SummaryFormat format, const SummaryOptions& options);

}  // namespace cabert::eval
