// What a fine-tuning task is, independent of where its data came from: classification over a label set,
// regression, or SQuAD span extraction; its canonical name (used in metrics records and summaries) and the
// metrics it reports.
#pragma once

#include <string>
#include <vector>

#include "lib/tasks/task_data.h"

namespace cabert::tasks {

enum class TaskKind { kClassification, kRegression, kSpan };
const char* task_kind_name(TaskKind kind);
TaskKind parse_task_kind(const std::string& name);  // "classification", "regression", "span"

struct TaskDefinition {
  std::string name;  // "SST-2", "MNLI", "SQuAD1.1", or the generic task's name
  TaskKind kind = TaskKind::kClassification;
  std::vector<std::string> labels;  // classification: label strings in class-index order
  bool glue = false;                // read with the GLUE reader (distribution TSVs)
  bool squad_v2 = false;            // SQuAD: unanswerable questions allowed
  bool pair = false;                // sentence-pair input
  // Names of the metric values this task reports: accuracy, f1, mcc, macro_f1, pearson, spearman, exact.
  std::vector<std::string> metrics;
};

// Maps label strings to class indices and back; unknown labels are a DataError naming file and line.
class LabelMap {
 public:
  explicit LabelMap(std::vector<std::string> labels);
  int index(const std::string& label, const std::string& file, uint64_t line) const;
  const std::string& label(int index) const;
  size_t size() const { return labels_.size(); }
  const std::vector<std::string>& labels() const { return labels_; }

 private:
  std::vector<std::string> labels_;
};

// Regression target from a label string; DataError naming file and line when it is not a number.
float parse_regression_label(const std::string& label, const std::string& file, uint64_t line);

}  // namespace cabert::tasks
