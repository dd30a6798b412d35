#include "lib/eval/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
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

// The control and truncation counts of the first record that has them: every run of one fine-tuning shares its
// training and dev data, and so its control.
void add_controls(const std::vector<const pb::TaskMetrics*>& records, SummaryCell& cell) {
  for (const auto* record : records) {
    if (!cell.control && record->has_control_score()) cell.control = record->control_score();
    if (!cell.train_truncated && record->has_train_truncated()) {
      cell.train_truncated = record->train_truncated();
      if (record->has_train_examples()) cell.train_examples = record->train_examples();
    }
    if (!cell.dev_truncated && record->has_dev_truncated()) {
      cell.dev_truncated = record->dev_truncated();
      cell.dev_examples = record->examples();
    }
  }
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
  add_controls(records, cell);
  if (groups.size() == 1) {
    RunMeans means = mean_over_runs(records);
    cell.mean = means.score.mean;
    cell.sem = means.score.sem;
    cell.metrics = std::move(means.metrics);
  } else {
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
    cell.mean = score.mean;
    cell.sem = score.sem;
    for (const auto& [name, series] : values) cell.metrics[name] = mean_and_sem(series).mean;
  }
  cell.score = cell.mean;
  if (aggregate == RunAggregate::kBest) {
    cell.score = best->score();
    cell.metrics.clear();
    cell.metrics.insert(best->metrics().begin(), best->metrics().end());
  }
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

// The tasks' controls from the rows' cells; a row without one (evaluate's records) takes the task's when every
// row with one agrees.
void gather_controls(const std::map<std::string, std::map<std::string, std::vector<const pb::TaskMetrics*>>>& grouped,
                     SummaryTable& table) {
  for (const auto& task : table.tasks) {
    std::optional<TaskControl> control;
    for (const auto& model : table.models) {
      auto cell = table.cells[model].find(task);
      if (cell == table.cells[model].end() || !cell->second.control) continue;
      const double value = *cell->second.control;
      if (!control) {
        control = TaskControl{value, value, ""};
        for (const auto* record : grouped.at(model).at(task)) {
          if (record->has_control_score()) {
            control->rule = record->control();
            break;
          }
        }
      }
      control->low = std::min(control->low, value);
      control->high = std::max(control->high, value);
    }
    if (!control) continue;
    table.controls[task] = *control;
    if (control->low != control->high) continue;
    for (auto& [model, cells] : table.cells) {
      auto cell = cells.find(task);
      if (cell != cells.end() && !cell->second.control) cell->second.control = control->low;
    }
  }
}

// GLUE over `scores` from two tasks on (one task's "GLUE" would repeat its score under another name).
std::optional<GlueScore> glue_of(const std::map<std::string, double>& scores, bool with_wnli) {
  GlueScore glue = glue_score(scores, with_wnli);
  if (glue.task_count < 2) return std::nullopt;
  return glue;
}

// The floor tasks, and the GLUE scores without them where a model's GLUE averages one of them.
void mark_floors(SummaryTable& table, const SummaryOptions& options) {
  for (const auto& task : table.tasks) {
    std::vector<const SummaryCell*> rows;
    for (const auto& model : table.models) {
      auto cell = table.cells[model].find(task);
      if (cell != table.cells[model].end()) rows.push_back(&cell->second);
    }
    if (at_floor(rows)) table.floor_tasks.push_back(task);
  }
  const std::set<std::string> floors(table.floor_tasks.begin(), table.floor_tasks.end());
  bool floor_in_glue = false;
  for (const auto& [model, tasks] : table.glue_tasks) {
    for (const auto& task : tasks) floor_in_glue = floor_in_glue || floors.count(task) > 0;
  }
  std::map<std::string, double> controls, controls_without;
  for (const auto& [task, control] : table.controls) {
    controls[task] = control.low;
    if (floors.count(task) == 0) controls_without[task] = control.low;
  }
  if (auto glue = glue_of(controls, options.glue_with_wnli)) table.control_glue = glue->score;
  if (!floor_in_glue) return;
  if (auto glue = glue_of(controls_without, options.glue_with_wnli)) table.control_glue_without_floor = glue->score;
  for (const auto& model : table.models) {
    std::map<std::string, double> scores, bests;
    for (const auto& [task, cell] : table.cells.at(model)) {
      if (floors.count(task)) continue;
      scores[task] = cell.score;
      bests[task] = cell.best;
    }
    if (auto glue = glue_of(scores, options.glue_with_wnli)) {
      table.glue_without_floor[model] = glue->score;
      table.glue_best_without_floor[model] = glue_score(bests, options.glue_with_wnli).score;
      table.glue_tasks_without_floor[model] = glue->tasks;
    }
  }
}

}  // namespace

bool at_floor(const std::vector<const SummaryCell*>& rows) {
  if (rows.empty()) return false;
  for (const auto* row : rows) {
    if (!row->control) return false;
    // NaN (every run failed) is never above the control.
    if (row->mean - *row->control > row->sem + 1e-9) return false;
  }
  return true;
}

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
  gather_controls(grouped, table);
  mark_floors(table, options);
  return table;
}

namespace {

bool floor_in_glue(const SummaryTable& table) {
  for (const auto& [model, tasks] : table.glue_tasks) {
    for (const auto& task : tasks) {
      if (std::find(table.floor_tasks.begin(), table.floor_tasks.end(), task) != table.floor_tasks.end()) return true;
    }
  }
  return false;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string glue_text(const std::map<std::string, double>& glue, const std::map<std::string, double>& best,
                      const std::string& model, const SummaryOptions& options) {
  if (glue.count(model) == 0) return "-";
  std::string text = fixed(glue.at(model), options.decimals);
  if (options.aggregate == RunAggregate::kMeanAndBest) {
    text += str(" (", fixed(best.at(model), options.decimals), ")");
  }
  return text;
}

std::string control_text(const TaskControl& control, const SummaryOptions& options) {
  if (control.low == control.high) return fixed(control.low, options.decimals);
  return fixed(control.low, options.decimals) + " to " + fixed(control.high, options.decimals);
}

// "T of N" for one part (train or dev) of the truncated counts; the rows' distinct values where they differ.
std::string truncated_part(const SummaryTable& table, const std::string& task, bool train) {
  std::vector<std::string> texts;
  for (const auto& model : table.models) {
    auto it = table.cells.at(model).find(task);
    if (it == table.cells.at(model).end()) continue;
    const SummaryCell& cell = it->second;
    const auto& truncated = train ? cell.train_truncated : cell.dev_truncated;
    const auto& examples = train ? cell.train_examples : cell.dev_examples;
    if (!truncated) continue;
    std::string text = std::to_string(*truncated) + (examples ? " of " + std::to_string(*examples) : "");
    if (std::find(texts.begin(), texts.end(), text) == texts.end()) texts.push_back(text);
  }
  return texts.empty() ? "-" : join(texts, ", ");
}

bool any_truncated(const SummaryTable& table) {
  for (const auto& [model, cells] : table.cells) {
    for (const auto& [task, cell] : cells) {
      if (cell.train_truncated || cell.dev_truncated) return true;
    }
  }
  return false;
}

nlohmann::ordered_json json_summary(const SummaryTable& table, const SummaryOptions& options) {
  nlohmann::ordered_json out;
  out["aggregate"] = aggregate_name(options.aggregate);
  out["tasks"] = table.tasks;
  out["floor_tasks"] = table.floor_tasks;
  out["models"] = nlohmann::ordered_json::array();
  for (const auto& model : table.models) {
    nlohmann::ordered_json row;
    row["model"] = model;
    for (const auto& [task, cell] : table.cells.at(model)) {
      nlohmann::ordered_json entry;
      entry["score"] = cell.score;
      entry["mean"] = cell.mean;
      entry["sem"] = cell.sem;
      entry["best"] = cell.best;
      entry["runs"] = cell.runs;
      entry["pretrain_runs"] = cell.pretrain_runs;
      entry["metrics"] = cell.metrics;
      if (cell.control) entry["control"] = *cell.control;
      if (cell.train_truncated) entry["train_truncated"] = *cell.train_truncated;
      if (cell.train_examples) entry["train_examples"] = *cell.train_examples;
      if (cell.dev_truncated) entry["dev_truncated"] = *cell.dev_truncated;
      if (cell.dev_examples) entry["dev_examples"] = *cell.dev_examples;
      row["tasks"][task] = entry;
    }
    if (table.glue.count(model)) {
      row["glue"] = table.glue.at(model);
      row["glue_best"] = table.glue_best.at(model);
      row["glue_tasks"] = table.glue_tasks.at(model);
    }
    if (table.glue_without_floor.count(model)) {
      row["glue_without_floor"] = table.glue_without_floor.at(model);
      row["glue_best_without_floor"] = table.glue_best_without_floor.at(model);
      row["glue_tasks_without_floor"] = table.glue_tasks_without_floor.at(model);
    }
    out["models"].push_back(row);
  }
  out["controls"] = nlohmann::ordered_json::object();
  for (const auto& [task, control] : table.controls) {
    out["controls"][task] = {{"low", control.low}, {"high", control.high}, {"rule", control.rule}};
  }
  if (table.control_glue) out["control_glue"] = *table.control_glue;
  if (table.control_glue_without_floor) out["control_glue_without_floor"] = *table.control_glue_without_floor;
  return out;
}

// The notes under a markdown table: what GLUE averages, what the control, the floor mark and the truncated counts
// are.
std::string table_notes(const SummaryTable& table, const SummaryOptions& options, bool without_floor) {
  std::string out;
  const std::string cells_note = cells_description(table, options);
  if (!table.glue.empty()) {
    // Say what the GLUE column averages, since a partial set of tasks is not the leaderboard's score.
    std::set<std::vector<std::string>> sets;
    for (const auto& [model, tasks] : table.glue_tasks) sets.insert(tasks);
    out += "\nGLUE: mean of the task scores";
    out += sets.size() == 1 ? " over " + join(*sets.begin(), ", ") : " over the GLUE tasks each model has";
    out += str(" (MNLI-m/-mm count as one task; WNLI ", options.glue_with_wnli ? "included" : "left out",
               "; MRPC/QQP: mean of F1 and accuracy; STS-B: mean of Pearson and Spearman)",
               without_floor ? str("; GLUE w/o floor: the same without ", join(table.floor_tasks, ", ")) : "",
               cells_note.empty() ? "" : "; cells: " + cells_note, "\n");
  } else if (!cells_note.empty()) {
    out += "\nCells: " + cells_note + "\n";
  }
  if (!table.controls.empty()) {
    std::vector<std::string> rules;
    for (const auto& task : table.tasks) {
      auto it = table.controls.find(task);
      if (it != table.controls.end() && !it->second.rule.empty()) rules.push_back(task + ": " + it->second.rule);
    }
    out += str("\nControl: the task's score on its dev set of a prediction that ignores the input, from the "
               "training examples fine-tuned on: the majority label (MRPC/QQP: mean of F1 and accuracy; CoLA: MCC, "
               "0 for any constant); regression (STS-B): a constant, whose Pearson and Spearman are undefined and "
               "count as 0; SQuAD: no answer. ",
               table.floor_tasks.empty() ? "No task is at its floor" : "(floor): the task is at its floor",
               ": no row's mean is more than one SEM above the control (mean - control <= SEM; one run has SEM 0, "
               "so must not exceed it)",
               rules.empty() ? "" : ". " + join(rules, "; "), "\n");
  }
  if (any_truncated(table)) {
    out += "\nTruncated train / dev: examples longer than the maximum length before truncation, of the training "
           "examples fine-tuned on and of the dev examples\n";
  }
  return out;
}

}  // namespace

std::string render_summary(const SummaryTable& table, SummaryFormat format, const SummaryOptions& options) {
  if (format == SummaryFormat::kJson) return json_summary(table, options).dump(2) + "\n";
  const bool any_glue = !table.glue.empty();
  const bool without_floor = any_glue && floor_in_glue(table);
  std::vector<std::string> header = {"model"};
  for (const auto& task : table.tasks) {
    const bool floor = std::find(table.floor_tasks.begin(), table.floor_tasks.end(), task) != table.floor_tasks.end();
    header.push_back(floor ? task + " (floor)" : task);
  }
  if (any_glue) header.push_back("GLUE");
  if (without_floor) header.push_back("GLUE w/o floor");
  std::vector<std::vector<std::string>> rows;
  const char* plus_minus = format == SummaryFormat::kTsv ? " +- " : " ± ";
  for (const auto& model : table.models) {
    std::vector<std::string> row = {model};
    const auto& cells = table.cells.at(model);
    for (const auto& task : table.tasks) {
      auto it = cells.find(task);
      row.push_back(it == cells.end() ? "-" : cell_text(it->second, options, plus_minus));
    }
    if (any_glue) row.push_back(glue_text(table.glue, table.glue_best, model, options));
    if (without_floor) {
      row.push_back(glue_text(table.glue_without_floor, table.glue_best_without_floor, model, options));
    }
    rows.push_back(row);
  }
  if (!table.controls.empty()) {
    std::vector<std::string> row = {"control"};
    for (const auto& task : table.tasks) {
      auto it = table.controls.find(task);
      row.push_back(it == table.controls.end() ? "-" : control_text(it->second, options));
    }
    if (any_glue) row.push_back(table.control_glue ? fixed(*table.control_glue, options.decimals) : "-");
    if (without_floor) {
      row.push_back(table.control_glue_without_floor ? fixed(*table.control_glue_without_floor, options.decimals)
                                                     : "-");
    }
    rows.push_back(row);
  }
  if (any_truncated(table)) {
    std::vector<std::string> row = {"truncated train / dev"};
    for (const auto& task : table.tasks) {
      row.push_back(truncated_part(table, task, true) + " / " + truncated_part(table, task, false));
    }
    if (any_glue) row.push_back("-");
    if (without_floor) row.push_back("-");
    rows.push_back(row);
  }
  std::string out;
  if (format == SummaryFormat::kTsv) {
    out += join(header, "\t") + "\n";
    for (const auto& row : rows) out += join(row, "\t") + "\n";
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
  return out + table_notes(table, options, without_floor);
}

}  // namespace cabert::eval
