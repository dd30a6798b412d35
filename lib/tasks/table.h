// The generic task family (Tay et al.'s sets and any other labelled table) in one place.
// Generic labelled text from CSV (RFC 4180 quoting, quoted fields may span lines), TSV (tabs only, no quoting)
// or JSONL (one object per line). Columns are named by header name, or by 0-based index for files without
// a header; JSONL uses keys.
#pragma once

#include <string>

#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"

namespace cabert::tasks {

enum class TableFormat { kCsv, kTsv, kJsonl };

struct TableOptions {
  TableFormat format = TableFormat::kCsv;
  bool header = true;  // CSV/TSV: first row names the columns
  std::string text_column = "text";
  std::string text_pair_column;        // empty: single-sentence task
  std::string label_column = "label";  // empty: unlabelled
  std::string id_column;               // empty: the line number
};

// By extension: .csv, .tsv/.txt, .jsonl/.json; UsageError otherwise.
TableFormat table_format_from_path(const std::string& path);
// "csv", "tsv", "jsonl"; UsageError otherwise.
TableFormat parse_table_format(const std::string& name);

TaskData read_table(const std::string& path, const TableOptions& table, const ReadOptions& options = {});

// A generic classification/regression task from CSV/TSV/JSONL: labels, when not given, are the distinct
// labels of the training data in sorted order (numerically when all are integers).
TaskDefinition generic_task(const std::string& name, TaskKind kind, bool pair, std::vector<std::string> labels,
                            const tasks::TaskData* train);

}  // namespace cabert::tasks
