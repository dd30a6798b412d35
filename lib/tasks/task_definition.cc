#include "lib/tasks/task_definition.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "lib/core/errors.h"
#include "lib/text/tasks/glue.h"

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

namespace {

std::vector<std::string> metrics_for(const std::string& glue_metric) {
  if (glue_metric == "mcc") return {"mcc", "accuracy"};
  if (glue_metric == "f1_accuracy") return {"f1", "accuracy"};
  if (glue_metric == "pearson_spearman") return {"pearson", "spearman"};
  return {"accuracy"};
}

}  // namespace

bool known_task(const std::string& name, TaskDefinition* definition) {
  std::string squashed = text::canonical_task_name(name);
  if (squashed == "squad" || squashed == "squad11" || squashed == "squadv11" || squashed == "squad1" ||
      squashed == "squad20" || squashed == "squadv20" || squashed == "squad2") {
    definition->squad_v2 = squashed.find('2') != std::string::npos;
    definition->name = definition->squad_v2 ? "SQuAD2.0" : "SQuAD1.1";
    definition->kind = TaskKind::kSpan;
    definition->pair = true;
    definition->metrics = {"exact", "f1"};
    return true;
  }
  if (!text::is_glue_task(name)) return false;
  const text::GlueTask& glue = text::glue_task(name);
  definition->name = glue.name;
  definition->glue = true;
  definition->kind = glue.regression ? TaskKind::kRegression : TaskKind::kClassification;
  definition->labels = glue.labels;
  definition->pair = !glue.text_b.empty();
  definition->metrics = metrics_for(glue.metric);
  return true;
}

TaskDefinition generic_task(const std::string& name, TaskKind kind, bool pair, std::vector<std::string> labels,
                            const text::TaskData* train) {
  TaskDefinition definition;
  definition.name = name;
  definition.kind = kind;
  definition.pair = pair;
  if (kind == TaskKind::kRegression) {
    definition.metrics = {"pearson", "spearman"};
    return definition;
  }
  if (labels.empty() && train != nullptr) {
    std::set<std::string> seen;
    for (const auto& example : train->examples) seen.insert(example.label);
    labels.assign(seen.begin(), seen.end());
    auto is_integer = [](const std::string& s) {
      if (s.empty()) return false;
      char* end = nullptr;
      std::strtoll(s.c_str(), &end, 10);
      return *end == '\0';
    };
    if (std::all_of(labels.begin(), labels.end(), is_integer)) {
      std::sort(labels.begin(), labels.end(), [](const std::string& a, const std::string& b) {
        return std::strtoll(a.c_str(), nullptr, 10) < std::strtoll(b.c_str(), nullptr, 10);
      });
    }
  }
  if (labels.size() < 2) {
    throw DataError(str(train ? train->path : name, ": expected at least two distinct labels for a classification "
                        "task, got ", labels.size()));
  }
  definition.labels = std::move(labels);
  definition.metrics = {"accuracy", "macro_f1"};
  return definition;
}

LabelMap::LabelMap(std::vector<std::string> labels) : labels_(std::move(labels)) {}

int LabelMap::index(const std::string& label, const std::string& file, uint64_t line) const {
  auto it = std::find(labels_.begin(), labels_.end(), label);
  if (it != labels_.end()) return static_cast<int>(it - labels_.begin());
  std::string set;
  for (const auto& known : labels_) set += (set.empty() ? "" : ", ") + known;
  throw DataError(at_line(file, line, str("expected a label in {", set, "}, got '", label, "'")));
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
  return static_cast<float>(value);
}

}  // namespace cabert::tasks
