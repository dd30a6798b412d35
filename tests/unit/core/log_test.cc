// --log-format json and --log-file (lib/core/log.h): every stderr line is one JSON object with its fields;
// progress lines carry their numbers; the log file gets timestamped text lines; bad values are usage errors.
#include "lib/core/log.h"

#include <gtest/gtest.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/interrupt.h"
#include "lib/core/progress.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Restores the process-wide log settings after each test.
class LogFormatTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_log_format(LogFormat::kText);
    set_log_file("");
    set_log_subcommand("");
    set_quiet(false);
  }
};

// The signal handler's clock (integer arithmetic only) against the C library's gmtime_r, across leap days, century
// years, the epoch and before it.
TEST(SignalNoticeTime, MatchesGmtime) {
  std::vector<long long> moments = {0, -1, 951782400, 951868799, 4107542400, 1795751741, 253402300799, -2208988800};
  for (long long s = -400LL * 366 * 86400; s < 500LL * 366 * 86400; s += 86400LL * 37 + 3607) moments.push_back(s);
  for (long long seconds : moments) {
    char mine[25] = {};
    format_utc_time(seconds, 77, mine);
    const std::time_t t = static_cast<std::time_t>(seconds);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char theirs[64];
    std::snprintf(theirs, sizeof theirs, "%04d-%02d-%02dT%02d:%02d:%02d.077Z", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
    ASSERT_EQ(std::string(mine), std::string(theirs)) << seconds;
  }
}

TEST_F(LogFormatTest, JsonLinesParseWithTheirFields) {
  set_log_format(LogFormat::kJson);
  set_log_subcommand("pretrain");
  ::testing::internal::CaptureStderr();
  log_info("step 30 eval: \"quoted\" and a tab\t");
  log_warning("careful");
  ProgressLine progress;
  progress.label = "pretrain";
  progress.unit = "steps";
  progress.done = 30;
  progress.total = 100;
  progress.rate = 12.5;
  progress.eta_seconds = 5.6;
  progress.extra = "loss 2.5, lr 1e-03, 17.2 k tok/s";
  log_progress(progress, "pretrain: 30 steps", /*redraw=*/true, /*to_file=*/false);
  const auto lines = lines_of(::testing::internal::GetCapturedStderr());
  ASSERT_EQ(lines.size(), 3u);
  const auto info = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(info["level"], "info");
  EXPECT_EQ(info["subcommand"], "pretrain");
  EXPECT_EQ(info["source"], "cabert");
  EXPECT_EQ(info["message"], "step 30 eval: \"quoted\" and a tab\t");
  EXPECT_TRUE(
      std::regex_match(info["time"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(nlohmann::json::parse(lines[1])["level"], "warning");
  const auto line = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(line["level"], "progress");
  EXPECT_EQ(line["done"], 30);
  EXPECT_EQ(line["total"], 100);
  EXPECT_DOUBLE_EQ(line["rate"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(line["eta_seconds"].get<double>(), 5.6);
  EXPECT_DOUBLE_EQ(line["loss"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(line["lr"].get<double>(), 1e-3);
  EXPECT_EQ(line["extra"], "17.2 k tok/s");
  EXPECT_EQ(line["final"], false);
}

TEST_F(LogFormatTest, LogFileGetsTimestampedLinesAndKeepsEarlierRuns) {
  const std::string path = testing::temp_dir() + "/run.log";
  testing::write_text(path, "an earlier run\n");
  set_log_file(path);
  ::testing::internal::CaptureStderr();
  log_info("hello");
  log_warning("careful");
  const std::string terminal = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(terminal, "cabert: hello\ncabert: warning: careful\n");
  set_log_file("");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto lines = lines_of(text.str());
  ASSERT_EQ(lines.size(), 3u) << text.str();
  EXPECT_EQ(lines[0], "an earlier run");
  const std::regex stamped(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z cabert: (hello|warning: careful))");
  EXPECT_TRUE(std::regex_match(lines[1], stamped)) << lines[1];
  EXPECT_TRUE(std::regex_match(lines[2], stamped)) << lines[2];
}

// -q silences the terminal, not --log-file: the file still gets every message and the progress lines.
TEST_F(LogFormatTest, QuietLeavesTheLogFileComplete) {
  const std::string path = testing::temp_dir() + "/quiet.log";
  set_log_file(path);
  set_quiet(true);
  ::testing::internal::CaptureStderr();
  log_info("hello");
  log_warning("careful");
  Progress progress("pretrain", "steps", 4);
  progress.update(2);
  progress.finish("loss 1.5");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "cabert: warning: careful\n");
  set_log_file("");
  const auto lines = lines_of(testing::read_text(path));
  ASSERT_EQ(lines.size(), 3u) << testing::read_text(path);
  EXPECT_NE(lines[0].find(" cabert: hello"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" cabert: warning: careful"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(" cabert: pretrain: 2 steps, "), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(", loss 1.5"), std::string::npos) << lines[2];
  // Without a log file, -q writes nothing for info and progress.
  ::testing::internal::CaptureStderr();
  log_info("unseen");
  Progress silent("pretrain", "steps", 4);
  silent.finish();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(LogFormatTest, BadFormatAndUnwritableFileAreUsageErrors) {
  try {
    parse_log_format("xml");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--log-format: expected text or json, got 'xml'");
  }
  try {
    set_log_file("/nonexistent-dir/run.log");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--log-file: cannot open /nonexistent-dir/run.log for appending");
  }
}

}  // namespace
}  // namespace cabert
