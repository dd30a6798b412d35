// The GLUE task family in one place: the tasks in their distribution layout (download_glue_data.py), which
// file holds which split, which columns hold the texts and the label, the label set and the metrics, the
// reader and the task definitions fine-tuning and evaluation use. Columns are found by header name; CoLA's
// train/dev files have no header (source, label, original mark, sentence).
#pragma once

#include <string>
#include <vector>

#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"

namespace cabert::tasks {

struct GlueTask {
  std::string name;                 // "CoLA", "SST-2", ...
  std::string text_a, text_b;       // header names; text_b empty for single-sentence tasks
  std::string label;                // header name of the label column
  std::vector<std::string> labels;  // label strings in class-index order; empty for regression (STS-B)
  bool regression = false;
  std::string metric;                  // "mcc", "accuracy", "f1_accuracy", "pearson_spearman"
  std::vector<std::string> dev_files;  // dev.tsv, or dev_matched.tsv + dev_mismatched.tsv for MNLI
  std::vector<std::string> test_files;
  // What a label says about the input ("sentiment", "paraphrase", ...): a model fine-tuned on one task may be
  // evaluated on another only when their labels say the same thing (MNLI -> AX, QQP -> MRPC, not SST-2 -> CoLA).
  std::string judgement;
};

// Accepts the official names and common spellings (sst2, sts-b, mnli-mm ...); UsageError otherwise.
const GlueTask& glue_task(const std::string& name);
const std::vector<GlueTask>& glue_tasks();
bool is_glue_task(const std::string& name);
// Lower-cased letters and digits only: "SST-2", "sst2" and "Sst_2" all become "sst2".
std::string canonical_task_name(const std::string& name);

// Reads one GLUE file. Test files (no label column) come back with labeled == false.
TaskData read_glue(const GlueTask& task, const std::string& path, const ReadOptions& options = {});

// DIR/<file> for a split: "train", "dev" (first dev file), "test", or an explicit file name such as
// "dev_mismatched". Throws UsageError naming the missing file.
std::string glue_split_file(const GlueTask& task, const std::string& dir, const std::string& split);

// Fills `definition` for a GLUE task name (any spelling glue_task accepts); false for other names.
bool glue_definition(const std::string& name, TaskDefinition* definition);

// The train and dev files of `definition` in a GLUE task directory (MNLI: both dev files); only the empty
// ones are filled.
void glue_split_files(const TaskDefinition& definition, const std::string& dir, std::string* train,
                      std::vector<std::string>* dev);

// The name a split is reported under: "MNLI-m" / "MNLI-mm" for MNLI's dev files, else the task's.
std::string glue_metrics_task_name(const TaskDefinition& definition, const std::string& path);

}  // namespace cabert::tasks
