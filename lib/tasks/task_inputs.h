// The one entry to the task families (glue.h, squad.h, table.h; later text-to-text and translation): which
// family a --task name belongs to, where its files are and how they are read: `--data glue/SST-2` finds train.tsv and dev.tsv (MNLI:
// dev_matched.tsv and dev_mismatched.tsv), `--data squad/` finds train*.json and dev*.json, a generic task
// finds train.{csv,tsv,jsonl} and dev.{...} (or test.{...}); explicit --train/--dev files override.
#pragma once

#include <string>
#include <vector>

#include "lib/tasks/squad.h"
#include "lib/tasks/table.h"
#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"

namespace cabert::tasks {

struct TaskSource {
  std::string task;               // GLUE name, squad1.1/squad2.0, or a generic task's name
  std::vector<std::string> data;  // a directory, or files: the first is train, the rest dev
  std::string train;              // explicit training file
  std::vector<std::string> dev;   // explicit dev file(s)
  // Generic tasks.
  TableOptions table;
  bool format_given = false;        // table.format came from --format (else from each file's extension)
  std::vector<std::string> labels;  // label set in class order (else inferred from the training data)
  bool regression = false;
  bool skip_bad_rows = false;
};

// One file read for a task: text examples or SQuAD questions.
struct TaskSplit {
  std::string path;
  std::string metrics_task;  // name in metrics records: "MNLI-m" for dev_matched, "MNLI-mm", else the task
  TaskData data;             // classification / regression
  SquadData squad;           // span
  bool labeled = true;
  size_t size() const { return squad.questions.empty() ? data.examples.size() : squad.questions.size(); }
};

struct LoadedTask {
  TaskDefinition definition;
  TaskSplit train;
  std::vector<TaskSplit> dev;
};

// The GLUE tasks by any spelling the GLUE reader accepts, "squad1.1"/"squad" and "squad2.0"; `false`
// for anything else (a generic task).
bool known_task(const std::string& name, TaskDefinition* definition);

// Reads train and dev for fine-tuning. DataError for an empty training or dev set, unlabelled files, rows
// that do not fit the task (columns, labels), each naming the file.
LoadedTask load_training_task(const TaskSource& source);

// Reads one file for `definition` (evaluation). `source` supplies the table options for generic tasks.
TaskSplit read_task_file(const TaskDefinition& definition, const std::string& path, const TaskSource& source);

// The name a split is reported under ("MNLI-m" for dev_matched.tsv ...).
std::string metrics_task_name(const TaskDefinition& definition, const std::string& path);

// JSON round trip of a definition and its reading options, stored in fine-tuned checkpoints.
std::string definition_to_json(const TaskDefinition& definition, const TaskSource& source);
TaskDefinition definition_from_json(const std::string& json, TaskSource* source);

}  // namespace cabert::tasks
