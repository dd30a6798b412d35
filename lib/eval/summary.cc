#include "lib/eval/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/eval/metrics.h"
#include "lib/eval/task_score.h"

namespace cabert::eval {

SummaryFormat parse_summary_format(const std::string& name) {
  if (name == "markdown" || name == "md") return SummaryFormat::kMarkdown;
  if (name == "tsv") return SummaryFormat::kTsv;
  if (name == "json") return SummaryFormat::kJson;
  throw UsageError(str("--format: expected markdown, tsv or json, got '", name, "'"));
}

RunAggregate parse_run_aggregate(const std::string& name) {
  if (name == "mean") return RunAggregate::kMean;
  if (name == "best") return RunAggregate::kBest;
  if (name == "mean-best") return RunAggregate::kMeanAndBest;
  throw UsageError(str("--aggregate: expected mean, best or mean-best, got '", name, "'"));
}

namespace {

// The mean over one pre-training run's fine-tuning runs (a failed run, NaN, is left out when others are not),
// with their SEM and the metrics' means.
struct RunMeans {
  MeanSem score;
  std::map<std::string, double> metrics;
};

RunMeans mean_over_runs(const std::vector<const pb::TaskMetrics*>& records) {
  std::vector<double> scores;
  std::map<std::string, std::vector<double>> values;
  for (const auto* record : records) {
    if (std::isnan(record->score()) && records.size() > 1) continue;  // a failed run (see better_score)
    scores.push_back(record->score());
    for (const auto& [name, value] : record->metrics()) values[name].push_back(value);
  }
  RunMeans means;
  means.score = mean_and_sem(scores);
  if (scores.empty()) means.score.mean = std::numeric_limits<double>::quiet_NaN();  // every run failed
  for (const auto& [name, series] : values) means.metrics[name] = mean_and_sem(series).mean;
  return means;
}

// Records grouped by the pre-training run they were fine-tuned from, in first-seen order; records without
// one (older records, random initialisation) form one group.
std::vector<std::vector<const pb::TaskMetrics*>> by_pretrain_run(const std::vector<const pb::TaskMetrics*>& records) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const pb::TaskMetrics*>> groups;
  for (const auto* record : records) {
    const std::string& key = record->pretrain_run();
    if (groups.count(key) == 0) keys.push_back(key);
    groups[key].push_back(record);
  }
  std::vector<std::vector<const pb::TaskMetrics*>> out;
  for (const auto& key : keys) out.push_back(groups[key]);
  return out;
}

// Mean of means: each pre-training run's fine-tuning runs are averaged first, then the pre-training runs; the
// SEM is over the pre-training runs when there are several, else over the fine-tuning runs.
SummaryCell combine(const std::vector<const pb::TaskMetrics*>& records, RunAggregate aggregate) {
  SummaryCell cell;
  cell.runs = records.size();
  const pb::TaskMetrics* best = records.front();
  for (const auto* record : records) {
    if (better_score(record->score(), best->score())) best = record;
  }
  cell.best = best->score();
  const auto groups = by_pretrain_run(records);
  cell.pretrain_runs = groups.size();
  if (aggregate == RunAggregate::kBest) {
    cell.score = best->score();
    cell.metrics.insert(best->metrics().begin(), best->metrics().end());
    return cell;
  }
  if (groups.size() == 1) {
    RunMeans means = mean_over_runs(records);
    cell.score = means.score.mean;
    cell.sem = means.score.sem;
    cell.metrics = std::move(means.metrics);
    return cell;
  }
  std::vector<double> scores;
  std::map<std::string, std::vector<double>> values;
  for (const auto& group : groups) {
    RunMeans means = mean_over_runs(group);
    if (std::isnan(means.score.mean)) continue;  // every fine-tuning run of this pre-trained model failed
    scores.push_back(means.score.mean);
    for (const auto& [name, value] : means.metrics) values[name].push_back(value);
  }
  MeanSem score = mean_and_sem(scores);
  if (scores.empty()) score.mean = std::numeric_limits<double>::quiet_NaN();
  cell.score = score.mean;
  cell.sem = score.sem;
  for (const auto& [name, series] : values) cell.metrics[name] = mean_and_sem(series).mean;
  return cell;
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string cell_text(const SummaryCell& cell, const SummaryOptions& options, const char* plus_minus) {
  std::string text = fixed(cell.score, options.decimals);
  if (cell.runs > 1 && options.aggregate != RunAggregate::kBest) {  // several pre-training or fine-tuning runs
    text += str(plus_minus, fixed(cell.sem, options.decimals));
  }
  if (cell.runs > 1 && options.aggregate == RunAggregate::kMeanAndBest) {
    text += str(" (", fixed(cell.best, options.decimals), ")");
  }
  return text;
}

const char* aggregate_name(RunAggregate aggregate) {
  switch (aggregate) {
    case RunAggregate::kMean: return "mean";
    case RunAggregate::kBest: return "best";
    case RunAggregate::kMeanAndBest: return "mean-best";
  }
  return "";
}

// Which ± the cells show. Said whenever a row has several pre-training runs, and always in the papers' layout.
std::string cells_description(const SummaryTable& table, const SummaryOptions& options) {
  if (options.aggregate == RunAggregate::kBest) return "";
  uint64_t most = 1;
  for (const auto& [model, cells] : table.cells) {
    for (const auto& [task, cell] : cells) most = std::max(most, cell.pretrain_runs);
  }
  const char* best = options.aggregate == RunAggregate::kMeanAndBest ? " (best run)" : "";
  if (most == 1) return options.aggregate == RunAggregate::kMeanAndBest ? "mean ± SEM over the runs (best run)" : "";
  return str("mean ± SEM over the pre-training seeds (up to ", most,
             "; each seed's fine-tuning runs averaged first), or over the fine-tuning runs where a row has one "
             "pre-training run or none",
             best);
}

}  // namespace

SummaryTable summarize(const std::vector<pb::TaskMetrics>& records, const SummaryOptions& options) {
  SummaryTable table;
  std::map<std::string, std::map<std::string, std::vector<const pb::TaskMetrics*>>> grouped;
  std::set<std::string> tasks;
  for (const auto& record : records) {
    // Rows are the kept runs and evaluations, not the epochs or training-loss records along the way.
    if (record.kind() == pb::TaskMetrics::EPOCH || record.kind() == pb::TaskMetrics::TRAIN) continue;
    if (grouped.count(record.model()) == 0) table.models.push_back(record.model());
    auto& group = grouped[record.model()][record.task()];
    // One checkpoint is one run: a later record of the same checkpoint (an evaluation after fine-tuning)
    // replaces the earlier one instead of counting as another run.
    auto same = std::find_if(group.begin(), group.end(), [&](const pb::TaskMetrics* other) {
      return !record.checkpoint().empty() && other->checkpoint() == record.checkpoint();
    });
    if (same != group.end()) {
      *same = &record;
    } else {
      group.push_back(&record);
    }
    tasks.insert(record.task());
  }
  for (const auto& task : glue_table_tasks()) {
    if (tasks.erase(task)) table.tasks.push_back(task);
  }
  table.tasks.insert(table.tasks.end(), tasks.begin(), tasks.end());
  for (const auto& [model, by_task] : grouped) {
    std::map<std::string, double> scores, bests;
    for (const auto& [task, task_records] : by_task) {
      SummaryCell cell = combine(task_records, options.aggregate);
      scores[task] = cell.score;
      bests[task] = cell.best;
      table.cells[model][task] = std::move(cell);
    }
    // One task's "GLUE" would repeat its score under another name: a model gets one from two tasks on.
    GlueScore glue = glue_score(scores, options.glue_with_wnli);
    if (glue.task_count >= 2) {
      table.glue[model] = glue.score;
      table.glue_best[model] = glue_score(bests, options.glue_with_wnli).score;
      table.glue_tasks[model] = glue.tasks;
    }
  }
  return table;
}

std::string render_summary(const SummaryTable& table, SummaryFormat format, const SummaryOptions& options) {
  bool any_glue = !table.glue.empty();
  if (format == SummaryFormat::kJson) {
    nlohmann::ordered_json out;
    out["aggregate"] = aggregate_name(options.aggregate);
    out["tasks"] = table.tasks;
    out["models"] = nlohmann::ordered_json::array();
    for (const auto& model : table.models) {
      nlohmann::ordered_json row;
      row["model"] = model;
      for (const auto& [task, cell] : table.cells.at(model)) {
        nlohmann::ordered_json entry;
        entry["score"] = cell.score;
        entry["sem"] = cell.sem;
        entry["best"] = cell.best;
        entry["runs"] = cell.runs;
        entry["pretrain_runs"] = cell.pretrain_runs;
        entry["metrics"] = cell.metrics;
        row["tasks"][task] = entry;
      }
      if (table.glue.count(model)) {
        row["glue"] = table.glue.at(model);
        row["glue_best"] = table.glue_best.at(model);
        row["glue_tasks"] = table.glue_tasks.at(model);
      }
      out["models"].push_back(row);
    }
    return out.dump(2) + "\n";
  }
  std::vector<std::string> header = {"model"};
  header.insert(header.end(), table.tasks.begin(), table.tasks.end());
  if (any_glue) header.push_back("GLUE");
  std::vector<std::vector<std::string>> rows;
  const char* plus_minus = format == SummaryFormat::kTsv ? " +- " : " ± ";
  for (const auto& model : table.models) {
    std::vector<std::string> row = {model};
    const auto& cells = table.cells.at(model);
    for (const auto& task : table.tasks) {
      auto it = cells.find(task);
      row.push_back(it == cells.end() ? "-" : cell_text(it->second, options, plus_minus));
    }
    if (any_glue) {
      std::string glue = "-";
      if (table.glue.count(model)) {
        glue = fixed(table.glue.at(model), options.decimals);
        if (options.aggregate == RunAggregate::kMeanAndBest) {
          glue += str(" (", fixed(table.glue_best.at(model), options.decimals), ")");
        }
      }
      row.push_back(glue);
    }
    rows.push_back(row);
  }
  const std::string cells_note = cells_description(table, options);
  std::string out;
  if (format == SummaryFormat::kTsv) {
    for (const auto* line : {&header}) {
      for (size_t i = 0; i < line->size(); ++i) out += (i ? "\t" : "") + (*line)[i];
      out += "\n";
    }
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) out += (i ? "\t" : "") + row[i];
      out += "\n";
    }
    return out;
  }
  auto line = [&](const std::vector<std::string>& cells) {
    out += "|";
    for (const auto& cell : cells) out += " " + cell + " |";
    out += "\n";
  };
  line(header);
  out += "|---|";
  for (size_t i = 1; i < header.size(); ++i) out += "---:|";
  out += "\n";
  for (const auto& row : rows) line(row);
  if (any_glue) {
    // Say what the GLUE column averages, since a partial set of tasks is not the leaderboard's score.
    std::set<std::vector<std::string>> sets;
    for (const auto& [model, tasks] : table.glue_tasks) sets.insert(tasks);
    out += "\nGLUE: mean of the task scores";
    if (sets.size() == 1) {
      std::string names;
      for (const auto& task : *sets.begin()) names += (names.empty() ? "" : ", ") + task;
      out += " over " + names;
    } else {
      out += " over the GLUE tasks each model has";
    }
    out += str(" (MNLI-m/-mm count as one task; WNLI ", options.glue_with_wnli ? "included" : "left out",
               "; MRPC/QQP: mean of F1 and accuracy; STS-B: mean of Pearson and Spearman)",
               cells_note.empty() ? "" : "; cells: " + cells_note, "\n");
  } else if (!cells_note.empty()) {
    out += "\nCells: " + cells_note + "\n";
  }
  return out;
}

}  // namespace cabert::eval
