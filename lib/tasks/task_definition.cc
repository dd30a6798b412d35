#include "lib/tasks/task_definition.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "lib/core/errors.h"

namespace cabert::tasks {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::kClassification: return "classification";
    case TaskKind::kRegression: return "regression";
    case TaskKind::kSpan: return "span";
  }
  return "?";
}

TaskKind parse_task_kind(const std::string& name) {
  if (name == "classification") return TaskKind::kClassification;
  if (name == "regression") return TaskKind::kRegression;
  if (name == "span") return TaskKind::kSpan;
  throw UsageError(str("expected a task kind classification, regression or span, got '", name, "'"));
}

LabelMap::LabelMap(std::vector<std::string> labels) : labels_(std::move(labels)) {}

int LabelMap::index(const std::string& label, const std::string& file, uint64_t line) const {
  auto it = std::find(labels_.begin(), labels_.end(), label);
  if (it != labels_.end()) return static_cast<int>(it - labels_.begin());
  throw DataError(at_line(file, line, str("expected a label in {", joined(labels_), "}, got '", label, "'")));
}

const std::string& LabelMap::label(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= labels_.size()) {
    throw Error(str("internal: class index ", index, " outside 0..", labels_.size() - 1));
  }
  return labels_[index];
}

float parse_regression_label(const std::string& label, const std::string& file, uint64_t line) {
  char* end = nullptr;
  double value = std::strtod(label.c_str(), &end);
  if (label.empty() || *end != '\0') {
    throw DataError(at_line(file, line, str("expected a number as the regression label, got '", label, "'")));
  }
  // NaN or infinity would make every loss after it NaN; a float overflow would make it infinite.
  if (!std::isfinite(value) || std::fabs(value) > std::numeric_limits<float>::max()) {
    throw DataError(at_line(file, line, str("expected a finite regression label, got '", label, "'")));
  }
  return static_cast<float>(value);
}

}  // namespace cabert::tasks
