// --resume with changed options (lib/train/resume_options.h): operational options change freely, the length
// with a message, anything else is refused with every change named unless --allow-changed-options.
#include "lib/train/resume_options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lib/core/errors.h"
#include "lib/core/run_context.h"
#include "lib/io/checkpoint_file.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

TEST(ResumeOptions, OnlyOptionsThatDefineTheRunCount) {
  const std::map<std::string, std::string> before = {{"lr", "0.0003"}, {"steps", "100"}, {"threads", "2"},
                                                     {"set", ""},      {"seed", "42"},   {"old-option", "x"}};
  const std::map<std::string, std::string> after = {{"lr", "0.001"},        {"steps", "200"}, {"threads", "1"},
                                                    {"set", "dropout=0.2"}, {"seed", "42"},   {"new-option", "y"}};
  const auto changes = train::changed_run_options(before, after);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(train::describe_changes(changes),
            "--lr 0.001 (was 0.0003), --set dropout=0.2 (was ''), --steps 200 (was 100)");
}

TEST(ResumeOptions, AnotherNameOfTheSameFileIsNoChange) {
  const std::string dir = testing::temp_dir();
  for (const char* name : {"/c-00000-of-00002", "/c-00001-of-00002", "/other"}) {
    std::ofstream(dir + name) << "x";
  }
  const std::string first = dir + "/c-00000-of-00002", second = dir + "/c-00001-of-00002";
  const std::map<std::string, std::string> before = {{"corpus", first + "," + second}, {"init", dir + "/other"}};
  const std::map<std::string, std::string> same = {
      {"corpus", dir + "/./c-00000-of-00002," + dir + "/../" + std::filesystem::path(dir).filename().string() +
                     "/c-00001-of-00002"},
      {"init", dir + "//other"}};
  EXPECT_TRUE(train::changed_run_options(before, same).empty());
  const std::map<std::string, std::string> swapped = {{"corpus", second + "," + first}, {"init", dir + "/other"}};
  EXPECT_EQ(train::describe_changes(train::changed_run_options(before, swapped)),
            "--corpus " + second + "," + first + " (was " + first + "," + second + ")");
  const std::map<std::string, std::string> fewer = {{"corpus", first}, {"init", dir + "/missing"}};
  EXPECT_EQ(train::changed_run_options(before, fewer).size(), 2u);
}

TEST(ResumeOptions, CheckpointOptionsAgainstTheResumingCommand) {
  const RunContext saved = run_context();
  const std::string path = testing::temp_dir() + "/checkpoint.cabert";
  run_context().options = {{"lr", "0.0003"}, {"steps", "100"}, {"threads", "2"}, {"batch-size", "32"}};
  io::save_checkpoint(path, pb::CheckpointInfo(), {});
  run_context().options = {{"lr", "0.0003"}, {"steps", "300"}, {"threads", "1"}, {"batch-size", "32"}};
  EXPECT_EQ(train::check_resume_options(path, false).size(), 1u);  // the length alone: allowed
  run_context().options = {{"lr", "0.001"}, {"steps", "100"}, {"threads", "2"}, {"batch-size", "64"}};
  try {
    train::check_resume_options(path, false);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--resume: options differ from those that wrote " + path +
                                         ": --batch-size 64 (was 32), --lr 0.001 (was 0.0003); rerun with the same "
                                         "options, or pass --allow-changed-options to continue with the new ones");
  }
  EXPECT_EQ(train::check_resume_options(path, true).size(), 2u);
  run_context() = saved;
}

}  // namespace
}  // namespace cabert
