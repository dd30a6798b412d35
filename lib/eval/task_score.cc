#include "lib/eval/task_score.h"

#include <cmath>

#include <algorithm>

#include "lib/core/errors.h"

namespace cabert::eval {
namespace {

double metric(const std::string& task, const MetricMap& metrics, const std::string& name) {
  auto it = metrics.find(name);
  if (it == metrics.end()) throw Error(str("task ", task, ": expected a metric named ", name, " in the record"));
  return it->second;
}

}  // namespace

double task_score(const std::string& task, const MetricMap& metrics) {
  if (task == "CoLA") return 100 * metric(task, metrics, "mcc");
  if (task == "MRPC" || task == "QQP") {
    return 100 * (metric(task, metrics, "f1") + metric(task, metrics, "accuracy")) / 2;
  }
  if (task == "STS-B") return 100 * (metric(task, metrics, "pearson") + metric(task, metrics, "spearman")) / 2;
  if (task.rfind("SQuAD", 0) == 0) return 100 * metric(task, metrics, "f1");
  if (metrics.count("accuracy") == 0 && metrics.count("pearson") > 0) {
    // Generic regression tasks have no accuracy: use the STS-B rule.
    return 100 * (metric(task, metrics, "pearson") + metric(task, metrics, "spearman")) / 2;
  }
  return 100 * metric(task, metrics, "accuracy");
}

const std::vector<std::string>& glue_table_tasks() {
  static const std::vector<std::string> tasks = {"CoLA",   "SST-2",   "MRPC", "STS-B", "QQP",
                                                 "MNLI-m", "MNLI-mm", "QNLI", "RTE",   "WNLI"};
  return tasks;
}

bool is_glue_task(const std::string& task) {
  const auto& tasks = glue_table_tasks();
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

GlueScore glue_score(const std::map<std::string, double>& task_scores, bool with_wnli) {
  GlueScore result;
  double sum = 0;
  int count = 0;
  std::vector<double> mnli;
  for (const auto& task : glue_table_tasks()) {
    auto it = task_scores.find(task);
    if (it == task_scores.end()) continue;
    if (task == "WNLI" && !with_wnli) continue;
    result.tasks.push_back(task);
    if (task == "MNLI-m" || task == "MNLI-mm") {
      mnli.push_back(it->second);
      continue;
    }
    sum += it->second;
    ++count;
  }
  if (!mnli.empty()) {
    sum += (mnli.size() == 2 ? (mnli[0] + mnli[1]) / 2 : mnli[0]);
    ++count;
  }
  result.task_count = count;
  result.score = count == 0 ? 0 : sum / count;
  return result;
}

bool better_score(double a, double b) { return !std::isnan(a) && (std::isnan(b) || a > b); }

}  // namespace cabert::eval
