// What every task reader returns: labelled (or, for test files, unlabelled) text examples with the line they
// came from, so that later errors (a label outside the task's set) can still name the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cabert::tasks {

struct TaskExample {
  std::string id;              // GLUE "index"/"id" column, or the line number when the file has none
  std::string text_a, text_b;  // text_b is empty for single-sentence tasks
  std::string label;           // raw label string; empty in unlabelled (test) files
  uint64_t line = 0;           // 1-based line of the row in its file
};

struct TaskData {
  std::string path;
  std::vector<TaskExample> examples;
  bool labeled = true;
  uint64_t skipped_rows = 0;  // malformed rows skipped under --skip-bad-rows
};

struct ReadOptions {
  // Malformed rows are counted and skipped instead of stopping with an error.
  bool skip_bad_rows = false;
};

// Splits on tabs only: GLUE files are not CSV-quoted (MRPC and RTE sentences hold unbalanced quotes).
std::vector<std::string> split_tabs(const std::string& line);

}  // namespace cabert::tasks
