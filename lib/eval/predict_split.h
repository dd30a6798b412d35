// Running a task model over one split and scoring it: predictions per example (label strings, regression
// values or answer texts) and the task's metrics. Shared by `finetune` (dev after each epoch) and `evaluate`.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "lib/eval/task_score.h"
#include "lib/models/task_model.h"
#include "lib/tasks/squad_features.h"
#include "lib/tasks/task_inputs.h"
#include "lib/text/tokenizer.h"

namespace cabert::eval {

struct PredictOptions {
  int max_length = 128;
  int batch_size = 64;
  tasks::SquadOptions squad;
  torch::Device device = torch::kCPU;
};

struct SplitPredictions {
  std::vector<std::string> ids;            // example / question ids
  std::vector<std::string> predictions;    // label string, number (regression) or answer text
  std::vector<std::string> golds;          // label strings / numbers; SQuAD: answers joined by " || "
  std::vector<std::vector<float>> scores;  // class probabilities, the regression value, or [span, null] scores
  bool labeled = true;
  MetricMap metrics;  // empty when unlabelled
  double score = 0;   // eval::task_score of the metrics (percent)
  uint64_t truncated_examples = 0;
};

// Features are built here; the model is put in eval mode and run without gradients.
SplitPredictions predict_split(models::TaskModel& model, const tasks::TaskDefinition& definition,
                               const tasks::TaskSplit& split, const text::Tokenizer& tokenizer,
                               const PredictOptions& options);

// What `evaluate --predictions` writes for a split: SQuAD's {id: answer} JSON (what the official scripts read), GLUE's
// submission TSV (index, prediction) for an unlabelled file, else id, prediction, gold and the scores to 4 places.
std::string predictions_file_text(const SplitPredictions& predictions, const tasks::TaskDefinition& definition);

// The metrics of a definition from predicted and gold class indices / values (exposed for tests).
MetricMap classification_metrics(const tasks::TaskDefinition& definition, const std::vector<int>& predicted,
                                 const std::vector<int>& gold);
MetricMap regression_metrics(const std::vector<double>& predicted, const std::vector<double>& gold);

}  // namespace cabert::eval
