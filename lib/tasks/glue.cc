#include "lib/tasks/glue.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "lib/core/errors.h"
#include "lib/text/text_source.h"
#include "lib/text/utf8.h"

namespace cabert::tasks {

using text::LineReader;
using text::trim;

const std::vector<GlueTask>& glue_tasks() {
  // clang-format off
  static const std::vector<GlueTask> tasks = {
      {"CoLA", "sentence", "", "label", {"0", "1"}, false, "mcc", {"dev.tsv"}, {"test.tsv"}, "acceptability"},
      {"SST-2", "sentence", "", "label", {"0", "1"}, false, "accuracy", {"dev.tsv"}, {"test.tsv"}, "sentiment"},
      {"MRPC", "#1 String", "#2 String", "Quality", {"0", "1"}, false, "f1_accuracy", {"dev.tsv"}, {"test.tsv"},
       "paraphrase"},
      {"STS-B", "sentence1", "sentence2", "score", {}, true, "pearson_spearman", {"dev.tsv"}, {"test.tsv"},
       "similarity"},
      {"QQP", "question1", "question2", "is_duplicate", {"0", "1"}, false, "f1_accuracy", {"dev.tsv"}, {"test.tsv"},
       "paraphrase"},
      {"MNLI", "sentence1", "sentence2", "gold_label", {"contradiction", "entailment", "neutral"}, false, "accuracy",
       {"dev_matched.tsv", "dev_mismatched.tsv"}, {"test_matched.tsv", "test_mismatched.tsv"}, "three-way entailment"},
      {"QNLI", "question", "sentence", "label", {"entailment", "not_entailment"}, false, "accuracy", {"dev.tsv"},
       {"test.tsv"}, "entailment"},
      {"RTE", "sentence1", "sentence2", "label", {"entailment", "not_entailment"}, false, "accuracy", {"dev.tsv"},
       {"test.tsv"}, "entailment"},
      {"WNLI", "sentence1", "sentence2", "label", {"0", "1"}, false, "accuracy", {"dev.tsv"}, {"test.tsv"},
       "pronoun resolution"},
      {"AX", "sentence1", "sentence2", "label", {"contradiction", "entailment", "neutral"}, false, "mcc", {},
       {"diagnostic.tsv"}, "three-way entailment"},
  };
  // clang-format on
  return tasks;
}

namespace {

const GlueTask* find_glue_task(const std::string& name) {
  std::string wanted = canonical_task_name(name);
  if (wanted == "mnlim" || wanted == "mnlimm" || wanted == "mnlimatched" || wanted == "mnlimismatched") wanted = "mnli";
  if (wanted == "diagnostic") wanted = "ax";
  for (const auto& task : glue_tasks()) {
    if (canonical_task_name(task.name) == wanted) return &task;
  }
  return nullptr;
}

struct Columns {
  int text_a = -1, text_b = -1, label = -1, id = -1;
  size_t needed = 0;  // fields a row must have
  size_t most = 0;    // fields a row may have: the header's (a row with more has a tab inside a text)
};

Columns columns_from_header(const GlueTask& task, const std::vector<std::string>& header, const std::string& path) {
  Columns columns;
  auto find = [&](const std::string& name) {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  columns.text_a = find(task.text_a);
  columns.text_b = task.text_b.empty() ? -1 : find(task.text_b);
  columns.label = find(task.label);
  columns.id = find("index");
  if (columns.id < 0) columns.id = find("id");
  std::string expected = task.text_a + (task.text_b.empty() ? "" : ", " + task.text_b);
  if (columns.text_a < 0 || (!task.text_b.empty() && columns.text_b < 0)) {
    std::string got;
    for (const auto& name : header) got += (got.empty() ? "" : ", ") + name;
    throw DataError(at_line(path, 1,
                            str(task.name, " expects columns ", expected, " (and ", task.label,
                                " in labelled files); the header has: ", got)));
  }
  columns.needed = static_cast<size_t>(std::max({columns.text_a, columns.text_b, columns.label, columns.id}) + 1);
  columns.most = header.size();
  return columns;
}

}  // namespace

std::string canonical_task_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

bool is_glue_task(const std::string& name) { return find_glue_task(name) != nullptr; }

const GlueTask& glue_task(const std::string& name) {
  const GlueTask* task = find_glue_task(name);
  if (task == nullptr) {
    std::string names;
    for (const auto& known : glue_tasks()) names += (names.empty() ? "" : ", ") + known.name;
    throw UsageError(str("unknown GLUE task '", name, "'; expected one of ", names));
  }
  return *task;
}

TaskData read_glue(const GlueTask& task, const std::string& path, const ReadOptions& options) {
  LineReader reader(path);
  TaskData data;
  data.path = path;
  std::string line;
  Columns columns;
  bool cola_raw = task.name == "CoLA";
  bool first = true;
  while (reader.next(&line)) {
    if (line.empty() && first) continue;
    if (std::string problem = text::utf8_problem(line); !problem.empty()) {
      if (first || !options.skip_bad_rows) throw DataError(at_line(path, reader.line_number(), problem));
      ++data.skipped_rows;
      continue;
    }
    std::vector<std::string> fields = split_tabs(line);
    if (first) {
      first = false;
      if (cola_raw && !(fields.size() == 2 && fields[0] == "index")) {
        // CoLA train/dev: no header; source, label, original mark, sentence.
        columns.text_a = 3;
        columns.label = 1;
        columns.needed = columns.most = 4;
      } else {
        columns = columns_from_header(task, fields, path);
        data.labeled = columns.label >= 0;
        continue;
      }
    }
    if (line.empty()) continue;
    auto bad_row = [&](const std::string& problem) {
      if (!options.skip_bad_rows) throw DataError(at_line(path, reader.line_number(), problem));
      ++data.skipped_rows;
    };
    if (fields.size() < columns.needed) {
      bad_row(
          str("expected at least ", columns.needed, " tab-separated fields for ", task.name, ", got ", fields.size()));
      continue;
    }
    if (fields.size() > columns.most) {
      // Its columns would be shifted: a piece of text read as the label, or a label as text.
      bad_row(str("expected ", columns.most, " tab-separated fields for ", task.name,
                  cola_raw && columns.most == 4 ? " (CoLA's source, label, mark, sentence)" : " as the header has",
                  ", got ", fields.size(), " (a tab inside a text?)"));
      continue;
    }
    TaskExample example;
    example.line = reader.line_number();
    example.id = columns.id >= 0 ? fields[columns.id] : std::to_string(reader.line_number());
    example.text_a = fields[columns.text_a];
    if (columns.text_b >= 0) example.text_b = fields[columns.text_b];
    if (data.labeled) {
      example.label = trim(fields[columns.label]);
      if (task.regression) {
        char* end = nullptr;
        double value = std::strtod(example.label.c_str(), &end);
        if (example.label.empty() || *end != '\0' || !(value >= 0.0 && value <= 5.0)) {
          bad_row(str(task.name, " label '", example.label, "' is not a similarity score in [0, 5]"));
          continue;
        }
      } else if (std::find(task.labels.begin(), task.labels.end(), example.label) == task.labels.end()) {
        bad_row(str(task.name, " label '", example.label, "' is not one of {", joined(task.labels), "}"));
        continue;
      }
    }
    data.examples.push_back(std::move(example));
  }
  return data;
}

std::string glue_split_file(const GlueTask& task, const std::string& dir, const std::string& split) {
  std::string file;
  if (split == "train") {
    file = "train.tsv";
  } else if (split == "dev") {
    if (task.dev_files.empty()) throw UsageError(str(task.name, " has no dev split"));
    file = task.dev_files.front();
  } else if (split == "test") {
    file = task.test_files.front();
  } else {
    file = split.size() > 4 && split.substr(split.size() - 4) == ".tsv" ? split : split + ".tsv";
  }
  std::string path = (std::filesystem::path(dir) / file).string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw UsageError(str(task.name, ": no ", split, " file: ", path, " does not exist"));
  }
  return path;
}

namespace {

std::vector<std::string> metrics_for(const std::string& glue_metric) {
  if (glue_metric == "mcc") return {"mcc", "accuracy"};
  if (glue_metric == "f1_accuracy") return {"f1", "accuracy"};
  if (glue_metric == "pearson_spearman") return {"pearson", "spearman"};
  return {"accuracy"};
}

}  // namespace

bool glue_definition(const std::string& name, TaskDefinition* definition) {
  if (!is_glue_task(name)) return false;
  const GlueTask& glue = glue_task(name);
  definition->name = glue.name;
  definition->glue = true;
  definition->kind = glue.regression ? TaskKind::kRegression : TaskKind::kClassification;
  definition->labels = glue.labels;
  definition->pair = !glue.text_b.empty();
  definition->metrics = metrics_for(glue.metric);
  return true;
}

void glue_split_files(const TaskDefinition& definition, const std::string& dir, std::string* train,
                      std::vector<std::string>* dev) {
  const GlueTask& glue = glue_task(definition.name);
  if (train->empty()) *train = glue_split_file(glue, dir, "train");
  if (dev->empty()) {
    for (const auto& file : glue.dev_files) dev->push_back(glue_split_file(glue, dir, file));
  }
}

std::string glue_metrics_task_name(const TaskDefinition& definition, const std::string& path) {
  if (definition.name == "MNLI") {
    std::string file = std::filesystem::path(path).filename().string();
    if (file.find("mismatched") != std::string::npos) return "MNLI-mm";
    return "MNLI-m";
  }
  return definition.name;
}

}  // namespace cabert::tasks
