// JSON task files that nlohmann parses but cabert must still refuse as bad data (found by the libFuzzer
// targets tests/fuzz/jsonl_fuzz and tests/fuzz/safetensors_fuzz, issue 15): numbers beyond double's range
// (nlohmann throws out_of_range, not parse_error, and it escaped the readers: exit 1, no file named) and
// nesting deep enough to overflow the stack when a value is printed back.
#include <gtest/gtest.h>

#include <string>

#include "lib/core/errors.h"
#include "lib/core/json_input.h"
#include "lib/tasks/squad.h"
#include "lib/tasks/table.h"
#include "tests/test_paths.h"

namespace cabert::tasks {
namespace {

using cabert::testing::data_error_message;
using cabert::testing::temp_dir;
using cabert::testing::write_text;

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonInput, BoundsNestingAndKeepsThePosition) {
  EXPECT_EQ(parse_json_input(nested(128)).size(), 1u);
  try {
    parse_json_input(nested(129));
    ADD_FAILURE() << "nesting 129 deep accepted";
  } catch (const JsonInputError& error) {
    EXPECT_STREQ(error.what(), "arrays and objects nested deeper than 128 levels");
  }
  try {
    parse_json_input("{\"a\": 1e400}");
    ADD_FAILURE() << "1e400 accepted";
  } catch (const JsonInputError& error) {
    EXPECT_STREQ(error.what(), "number overflow parsing '1e400'");
    EXPECT_EQ(error.byte(), 0u);
  }
  try {
    parse_json_input("{\"a\": x}");
    ADD_FAILURE() << "syntax error accepted";
  } catch (const JsonInputError& error) {
    EXPECT_EQ(error.byte(), 7u);
    EXPECT_EQ(std::string(error.what()).rfind("parse error at line 1, column 7", 0), 0u) << error.what();
  }
}

TEST(JsonlReader, OutOfRangeNumbersAndDeepNestingAreBadRows) {
  std::string dir = temp_dir();
  const std::string path = dir + "/hostile.jsonl";
  // 400,000 levels in one line (under the 1 MiB line bound): printed recursively, this overflowed the stack.
  write_text(path, "{\"text\": \"fine\", \"label\": 1}\n{\"text\": 1.5e400, \"label\": 0}\n{\"text\": " +
                       nested(400000) + ", \"label\": 1}\n");
  TableOptions jsonl;
  jsonl.format = TableFormat::kJsonl;
  EXPECT_EQ(data_error_message([&] { read_table(path, jsonl); }),
            path + ":2: invalid JSON: number overflow parsing '1.5e400'");
  ReadOptions skip;
  skip.skip_bad_rows = true;
  TaskData kept = read_table(path, jsonl, skip);
  ASSERT_EQ(kept.examples.size(), 1u);
  EXPECT_EQ(kept.skipped_rows, 2u);
  write_text(path, "{\"text\": " + nested(400000) + ", \"label\": 1}\n");
  EXPECT_EQ(data_error_message([&] { read_table(path, jsonl); }),
            path + ":1: invalid JSON: arrays and objects nested deeper than 128 levels");
}

TEST(SquadReader, OutOfRangeNumbersAndDeepNestingAreDataErrors) {
  std::string dir = temp_dir();
  const std::string path = dir + "/hostile.json";
  write_text(path,
             "{\"version\": \"1.1\", \"data\": [{\"paragraphs\": [{\"context\": \"abc\", \"qas\": [{\"id\": \"q\", "
             "\"question\": \"?\", \"answers\": [{\"text\": \"b\", \"answer_start\": 1e999}]}]}]}]}");
  EXPECT_EQ(data_error_message([&] { read_squad(path); }), path + ": invalid JSON (number overflow parsing '1e999')");
  write_text(path, "{\"data\": " + nested(300000) + "}");
  EXPECT_EQ(data_error_message([&] { read_squad(path); }),
            path + ": invalid JSON (arrays and objects nested deeper than 128 levels)");
}

}  // namespace
}  // namespace cabert::tasks
