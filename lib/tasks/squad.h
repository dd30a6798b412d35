// The SQuAD task family in one place (span extraction; features and decoding in squad_features.h).
// SQuAD v1.1 / v2.0 JSON ({"version", "data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]}).
// Every answer is checked against its context: answer_start counts Unicode code points (as Python does);
// we also give the byte offset into the UTF-8 context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/tasks/task_data.h"
#include "lib/tasks/task_definition.h"

namespace cabert::tasks {

struct SquadAnswer {
  std::string text;
  int64_t char_start = 0;  // code points, as in the file
  size_t byte_start = 0;   // bytes into the UTF-8 context
};

struct SquadQuestion {
  std::string id, title, question;
  size_t context_index = 0;  // into SquadData::contexts
  std::vector<SquadAnswer> answers;
  bool is_impossible = false;
};

struct SquadData {
  std::string path, version;
  std::vector<std::string> contexts;
  std::vector<SquadQuestion> questions;
  uint64_t skipped_questions = 0;
};

SquadData read_squad(const std::string& path, const ReadOptions& options = {});

// Byte offset of code point `index` in UTF-8 `text`, or std::string::npos when past the end.
size_t utf8_byte_offset(const std::string& text, int64_t index);

// Fills `definition` for "squad1.1", "squad2.0" and their spellings ("squad", "SQuAD-v2", ...); false
// otherwise.
bool squad_definition(const std::string& name, TaskDefinition* definition);

// Reads one SQuAD file for `definition`: DataError for an unanswerable question in a v1.1 task.
SquadData read_squad_split(const TaskDefinition& definition, const std::string& path, const ReadOptions& options);

}  // namespace cabert::tasks
