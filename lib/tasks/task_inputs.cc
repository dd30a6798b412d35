#include "lib/tasks/task_inputs.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/tasks/glue.h"
#include "lib/tasks/squad.h"
#include "lib/tasks/table.h"

namespace fs = std::filesystem;

namespace cabert::tasks {
namespace {

bool is_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// First file in `dir` whose name starts with `stem` and ends with one of `extensions`.
std::string find_file(const std::string& dir, const std::string& stem, const std::vector<std::string>& extensions) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  for (const auto& extension : extensions) {
    for (const auto& name : names) {
      if (name == stem + extension) return (fs::path(dir) / name).string();
    }
  }
  for (const auto& extension : extensions) {
    for (const auto& name : names) {
      if (name.rfind(stem, 0) == 0 && name.size() >= extension.size() &&
          name.compare(name.size() - extension.size(), extension.size(), extension) == 0) {
        return (fs::path(dir) / name).string();
      }
    }
  }
  return "";
}

void resolve_files(const TaskDefinition& definition, const TaskSource& source, std::string* train,
                   std::vector<std::string>* dev) {
  *train = source.train;
  *dev = source.dev;
  if (source.data.size() == 1 && is_dir(source.data[0])) {
    const std::string& dir = source.data[0];
    if (definition.glue) {
      glue_split_files(definition, dir, train, dev);
    } else {
      std::vector<std::string> extensions = definition.kind == TaskKind::kSpan
                                                ? std::vector<std::string>{".json"}
                                                : std::vector<std::string>{".csv", ".tsv", ".jsonl", ".json"};
      if (train->empty()) *train = find_file(dir, "train", extensions);
      if (dev->empty()) {
        std::string file = find_file(dir, "dev", extensions);
        if (file.empty()) file = find_file(dir, "valid", extensions);
        if (file.empty()) file = find_file(dir, "test", extensions);
        if (!file.empty()) dev->push_back(file);
      }
      if (train->empty()) throw UsageError(str(dir, ": found no train file (train", extensions.front(), ", ...)"));
    }
  } else if (!source.data.empty()) {
    if (train->empty()) *train = source.data[0];
    if (dev->empty()) dev->assign(source.data.begin() + 1, source.data.end());
  }
  if (train->empty()) throw UsageError("no training data: pass --data DIR (or files) or --train FILE");
  if (dev->empty()) throw UsageError(str("no dev data for ", definition.name, ": pass --dev FILE"));
  for (const auto& path : std::vector<std::string>{*train}) {
    if (!is_file(path)) throw UsageError(str("training file ", path, " does not exist"));
  }
  for (const auto& path : *dev) {
    if (!is_file(path)) throw UsageError(str("dev file ", path, " does not exist"));
  }
}

TableOptions table_options_for(const TaskSource& source, const std::string& path) {
  TableOptions table = source.table;
  if (!source.format_given) table.format = table_format_from_path(path);
  return table;
}

}  // namespace

bool known_task(const std::string& name, TaskDefinition* definition) {
  return squad_definition(name, definition) || glue_definition(name, definition);
}

std::string metrics_task_name(const TaskDefinition& definition, const std::string& path) {
  return definition.glue ? glue_metrics_task_name(definition, path) : definition.name;
}

TaskSplit read_task_file(const TaskDefinition& definition, const std::string& path, const TaskSource& source) {
  TaskSplit split;
  split.path = path;
  split.metrics_task = metrics_task_name(definition, path);
  ReadOptions read;
  read.skip_bad_rows = source.skip_bad_rows;
  if (definition.kind == TaskKind::kSpan) {
    split.squad = read_squad_split(definition, path, read);
    split.labeled = true;
    return split;
  }
  if (definition.glue) {
    split.data = read_glue(glue_task(definition.name), path, read);
  } else {
    split.data = read_table(path, table_options_for(source, path), read);
  }
  split.labeled = split.data.labeled;
  if (split.data.skipped_rows > 0) {
    log_warning(path, ": skipped ", split.data.skipped_rows, " malformed rows (--skip-bad-rows)");
  }
  if (split.labeled && definition.kind == TaskKind::kClassification) {
    LabelMap labels(definition.labels);
    for (const auto& example : split.data.examples) labels.index(example.label, path, example.line);
  }
  if (split.labeled && definition.kind == TaskKind::kRegression) {
    for (const auto& example : split.data.examples) parse_regression_label(example.label, path, example.line);
  }
  return split;
}

LoadedTask load_training_task(const TaskSource& source) {
  LoadedTask loaded;
  TaskDefinition& definition = loaded.definition;
  bool known = known_task(source.task, &definition);
  if (!known) {
    definition.name = source.task;
    definition.kind = source.regression ? TaskKind::kRegression : TaskKind::kClassification;
    definition.pair = !source.table.text_pair_column.empty();
  }
  std::string train;
  std::vector<std::string> dev;
  resolve_files(definition, source, &train, &dev);
  if (!known) {
    // Labels come from the training data unless given: read it unchecked first.
    ReadOptions read;
    read.skip_bad_rows = source.skip_bad_rows;
    TaskData data = read_table(train, table_options_for(source, train), read);
    definition = generic_task(source.task, definition.kind, definition.pair, source.labels, &data);
  }
  loaded.train = read_task_file(definition, train, source);
  if (!loaded.train.labeled) throw DataError(str(train, ": the training file has no labels"));
  if (loaded.train.size() == 0) throw DataError(str(train, ": expected training examples, got none"));
  for (const auto& path : dev) {
    TaskSplit split = read_task_file(definition, path, source);
    if (!split.labeled) throw DataError(str(path, ": the dev file has no labels, so it cannot be scored"));
    if (split.size() == 0) throw DataError(str(path, ": expected dev examples, got an empty dev set"));
    loaded.dev.push_back(std::move(split));
  }
  return loaded;
}

std::string definition_to_json(const TaskDefinition& definition, const TaskSource& source) {
  nlohmann::ordered_json json;
  json["name"] = definition.name;
  json["kind"] = task_kind_name(definition.kind);
  json["labels"] = definition.labels;
  json["glue"] = definition.glue;
  json["squad_v2"] = definition.squad_v2;
  json["pair"] = definition.pair;
  json["metrics"] = definition.metrics;
  json["text_column"] = source.table.text_column;
  json["text_pair_column"] = source.table.text_pair_column;
  json["label_column"] = source.table.label_column;
  json["id_column"] = source.table.id_column;
  json["header"] = source.table.header;
  return json.dump();
}

TaskDefinition definition_from_json(const std::string& text, TaskSource* source) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
    TaskDefinition definition;
    definition.name = json.at("name").get<std::string>();
    definition.kind = parse_task_kind(json.at("kind").get<std::string>());
    definition.labels = json.at("labels").get<std::vector<std::string>>();
    definition.glue = json.at("glue").get<bool>();
    definition.squad_v2 = json.at("squad_v2").get<bool>();
    definition.pair = json.at("pair").get<bool>();
    definition.metrics = json.at("metrics").get<std::vector<std::string>>();
    if (source) {
      source->task = definition.name;
      source->table.text_column = json.at("text_column").get<std::string>();
      source->table.text_pair_column = json.at("text_pair_column").get<std::string>();
      source->table.label_column = json.at("label_column").get<std::string>();
      source->table.id_column = json.at("id_column").get<std::string>();
      source->table.header = json.at("header").get<bool>();
    }
    return definition;
  } catch (const nlohmann::json::exception& error) {
    throw DataError(str("the checkpoint's task description is unreadable: ", error.what()));
  }
}

}  // namespace cabert::tasks
