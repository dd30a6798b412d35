// The GLUE tasks in their distribution layout (download_glue_data.py): which file holds which split, which
// columns hold the texts and the label, the label set and the metric. Columns are found by header name; CoLA's
// train/dev files have no header (source, label, original mark, sentence).
#pragma once

#include <string>
#include <vector>

#include "lib/text/tasks/task_data.h"

namespace cabert::text {

struct GlueTask {
  std::string name;                // "CoLA", "SST-2", ...
  std::string text_a, text_b;      // header names; text_b empty for single-sentence tasks
  std::string label;               // header name of the label column
  std::vector<std::string> labels; // label strings in class-index order; empty for regression (STS-B)
  bool regression = false;
  std::string metric;              // "mcc", "accuracy", "f1_accuracy", "pearson_spearman"
  std::vector<std::string> dev_files;  // dev.tsv, or dev_matched.tsv + dev_mismatched.tsv for MNLI
  std::vector<std::string> test_files;
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

}  // namespace cabert::text
