// The control of a task's table column (docs/PROTOCOL rule 4): the score of a prediction that ignores its input,
// computed from the task's own data with the task's own score (eval::task_score), so that a model's number can
// be read against what no learning at all would get.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/eval/task_score.h"
#include "lib/tasks/task_inputs.h"

namespace cabert::eval {

// The most frequent class index of `labels` (ties: the lowest index); -1 for no labels.
int majority_class(const std::vector<int>& labels);

struct ControlScore {
  bool defined = false;  // false: the dev split is unlabelled, or the training split has no labels
  double score = 0;      // percent, as TaskMetrics.score
  MetricMap metrics;     // the constant prediction's metrics on dev
  std::string rule;      // what was predicted, e.g. "majority training label '1' (2474 of 3668)"
};

// The constant prediction learned from the first `train_limit` training examples (0: all; the examples a
// fine-tuning with --max-train-examples trains on), scored on `dev` under the name `dev.metrics_task`:
// - classification: the majority training label everywhere (accuracy; MRPC/QQP: mean of F1 and accuracy, F1 of
//   the positive class; CoLA: MCC, which is 0 for any constant prediction);
// - regression: the training mean everywhere. Pearson and Spearman of a constant are undefined; as in
//   eval::pearson, they count as 0, so the control score is 0;
// - SQuAD spans: no answer everywhere (SQuAD1.1: 0; SQuAD2.0: the share of unanswerable questions).
ControlScore control_score(const tasks::TaskDefinition& definition, const tasks::TaskSplit& train,
                           uint64_t train_limit, const tasks::TaskSplit& dev);

}  // namespace cabert::eval
