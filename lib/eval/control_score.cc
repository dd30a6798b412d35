#include "lib/eval/control_score.h"

#include <algorithm>
#include <map>

#include "lib/core/errors.h"
#include "lib/eval/predict_split.h"
#include "lib/eval/squad_metrics.h"

namespace cabert::eval {
namespace {

using tasks::TaskKind;

size_t limited(size_t size, uint64_t limit) { return limit > 0 && limit < size ? static_cast<size_t>(limit) : size; }

ControlScore span_control(const tasks::TaskSplit& dev) {
  ControlScore control;
  std::vector<std::string> predictions(dev.squad.questions.size());  // "" = no answer
  std::vector<std::vector<std::string>> golds;
  for (const auto& question : dev.squad.questions) {
    std::vector<std::string> answers;
    for (const auto& answer : question.answers) answers.push_back(answer.text);
    golds.push_back(answers);
  }
  SquadScores scores = squad_scores(predictions, golds);
  control.metrics = {{"exact", scores.exact / 100}, {"f1", scores.f1 / 100}};
  control.score = task_score(dev.metrics_task, control.metrics);
  control.rule = "no answer everywhere";
  control.defined = true;
  return control;
}

ControlScore regression_control(const tasks::TaskSplit& train, uint64_t train_limit, const tasks::TaskSplit& dev) {
  ControlScore control;
  const auto& examples = train.data.examples;
  const size_t count = limited(examples.size(), train_limit);
  if (count == 0) return control;
  double sum = 0;
  for (size_t i = 0; i < count; ++i) {
    sum += tasks::parse_regression_label(examples[i].label, train.path, examples[i].line);
  }
  const double mean = sum / static_cast<double>(count);
  std::vector<double> gold;
  for (const auto& example : dev.data.examples) {
    gold.push_back(tasks::parse_regression_label(example.label, dev.path, example.line));
  }
  // Both correlations of a constant are undefined; eval::pearson counts them as 0.
  control.metrics = regression_metrics(std::vector<double>(gold.size(), mean), gold);
  control.score = task_score(dev.metrics_task, control.metrics);
  control.rule = str("the training mean ", mean, " everywhere (Pearson and Spearman of a constant are undefined: 0)");
  control.defined = true;
  return control;
}

ControlScore classification_control(const tasks::TaskDefinition& definition, const tasks::TaskSplit& train,
                                    uint64_t train_limit, const tasks::TaskSplit& dev) {
  ControlScore control;
  const tasks::LabelMap labels(definition.labels);
  const auto& examples = train.data.examples;
  const size_t count = limited(examples.size(), train_limit);
  std::vector<int> train_classes;
  for (size_t i = 0; i < count; ++i) {
    train_classes.push_back(labels.index(examples[i].label, train.path, examples[i].line));
  }
  const int majority = majority_class(train_classes);
  if (majority < 0) return control;
  std::vector<int> gold;
  for (const auto& example : dev.data.examples) gold.push_back(labels.index(example.label, dev.path, example.line));
  control.metrics = classification_metrics(definition, std::vector<int>(gold.size(), majority), gold);
  control.score = task_score(dev.metrics_task, control.metrics);
  const auto share = std::count(train_classes.begin(), train_classes.end(), majority);
  control.rule = str("the majority training label '", labels.label(majority), "' (", share, " of ", count,
                     ") everywhere");
  control.defined = true;
  return control;
}

}  // namespace

int majority_class(const std::vector<int>& labels) {
  std::map<int, uint64_t> counts;
  for (int label : labels) ++counts[label];
  int majority = -1;
  uint64_t most = 0;
  for (const auto& [label, count] : counts) {  // ascending labels: a tie keeps the lowest
    if (count > most) {
      majority = label;
      most = count;
    }
  }
  return majority;
}

ControlScore control_score(const tasks::TaskDefinition& definition, const tasks::TaskSplit& train,
                           uint64_t train_limit, const tasks::TaskSplit& dev) {
  if (!dev.labeled || !train.labeled) return {};
  switch (definition.kind) {
    case TaskKind::kSpan: return span_control(dev);
    case TaskKind::kRegression: return regression_control(train, train_limit, dev);
    case TaskKind::kClassification: return classification_control(definition, train, train_limit, dev);
  }
  return {};
}

}  // namespace cabert::eval
