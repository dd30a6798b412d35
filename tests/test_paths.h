// Paths and helpers shared by the tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/io/record_file.h"

namespace cabert::testing {

// ../shared/data (or $CABERT_SHARED_DATA) when present, else "" (tests that need it skip).
std::string shared_data_dir();
// A fresh empty directory for the current test, removed at exit.
std::string temp_dir();
// The project's source tree and the built cabert binary.
std::string source_dir();
std::string cabert_binary();

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};
// Runs `command` with /bin/sh, capturing stdout and stderr.
CommandResult run_command(const std::string& command);

void write_text(const std::string& path, const std::string& text);

// The message of the cabert::DataError that `action` throws; a test failure (and "") when it throws none.
std::string data_error_message(const std::function<void()>& action);
// The same for cabert::UsageError.
std::string usage_error_message(const std::function<void()>& action);

// $CABERT_PYTHON (else the build's CABERT_PYTHON_DEFAULT) when it can import every module of `modules`
// (e.g. "safetensors, numpy"); "" otherwise, and the tests that need it skip. Probed once per module list.
std::string python_with(const std::string& modules);
// Runs `python script args...` (stdout and stderr together); a test failure when it exits non-zero.
std::string run_python(const std::string& python, const std::string& script, const std::string& args);

// Every record of a cabert file, after checking that it holds `type` records (e.g. "cabert.pb.TaskMetrics").
template <typename Record>
std::vector<Record> read_records(const std::string& path, const std::string& type) {
  io::RecordReader reader(path);
  reader.expect(type);
  std::vector<Record> records;
  Record record;
  while (reader.next(&record)) records.push_back(record);
  return records;
}

// A small lower-cased SentencePiece model (vocabulary 600, 8 sentinels) trained once per test process on
// the shipped Alice sample (recipes/quickstart/data/gutenberg/11-0.txt); returns the .model path.
const std::string& alice_tokenizer();
std::string read_text(const std::string& path);

}  // namespace cabert::testing

#define CABERT_REQUIRE_SHARED_DATA(dir)                   \
  std::string dir = ::cabert::testing::shared_data_dir(); \
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (user clone): skipped"
