// How one number per task is made from its metrics (the GLUE leaderboard's rule: the unweighted mean of the
// task's metrics) and how tasks combine into the GLUE score.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace cabert::eval {

using MetricMap = std::map<std::string, double>;

// The task's score in percent: CoLA -> mcc; MRPC, QQP -> mean(f1, accuracy); STS-B -> mean(pearson, spearman);
// SQuAD* -> f1; anything else -> accuracy. Throws Error naming the metric when a needed one is missing.
double task_score(const std::string& task, const MetricMap& metrics);

// Whether score `a` ranks above `b`: every number ranks above NaN (a collapsed run, e.g. a correlation of
// constant predictions), so NaN is never chosen over a real score and never hides one.
bool better_score(double a, double b);

// The GLUE tasks in the order of the papers' tables (MNLI as its matched and mismatched dev sets).
const std::vector<std::string>& glue_table_tasks();
bool is_glue_task(const std::string& task);

struct GlueScore {
  double score = 0;
  std::vector<std::string> tasks;  // the tasks that were averaged
  int task_count = 0;              // how many, MNLI-m and MNLI-mm counting as one
};
// Mean of the task scores of the GLUE tasks present in `task_scores` (others are ignored). MNLI-m and MNLI-mm
// count as one task (their mean), as on the leaderboard. WNLI is left out unless `with_wnli`, as in the
// BERT, ELECTRA and Chang et al. tables. `tasks` is empty when no GLUE task is present.
GlueScore glue_score(const std::map<std::string, double>& task_scores, bool with_wnli = false);

}  // namespace cabert::eval
