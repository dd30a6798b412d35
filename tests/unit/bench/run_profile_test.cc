// `cabert bench --profile`'s summaries (lib/bench/run_profile.h): the nesting arithmetic on hand-made spans, the
// counts of a real profiled run of known ATen calls, the Markdown, and the files it writes.
#include "lib/bench/run_profile.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/core/errors.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

const bench::ProfiledName* find(const std::vector<bench::ProfiledName>& rows, const std::string& name) {
  for (const auto& row : rows) {
    if (row.name == name) return &row;
  }
  return nullptr;
}

TEST(RunProfile, SelfTimeIsTheDurationLessTheDirectCalleesPerThread) {
  // Thread 1: A [0, 100] calls B [10, 40] (which calls C [20, 30]) and D [50, 60]; then E [200, 210].
  // Thread 2: F [5, 50], overlapping A in time but not its callee. Two runs' worth: every figure halves.
  const std::vector<bench::HostOpSpan> spans = {
      {1, 50, 60, "D"}, {1, 0, 100, "A"}, {1, 20, 30, "C"}, {1, 10, 40, "B"}, {1, 200, 210, "E"}, {2, 5, 50, "F"},
  };
  const bench::HostOpSummary summary = bench::summarize_host_ops(spans, /*runs=*/2);
  EXPECT_DOUBLE_EQ(summary.calls, 3.0);
  EXPECT_DOUBLE_EQ(summary.top_level_calls, 1.5);                     // A, E, F
  EXPECT_DOUBLE_EQ(summary.top_level_us, (100 + 10 + 45) / 1e3 / 2);  // ns -> us, per run
  const auto expect = [&](const std::string& name, double self_ns, double total_ns, double top_level) {
    const bench::ProfiledName* row = find(summary.ops, name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_DOUBLE_EQ(row->calls, 0.5) << name;
    EXPECT_DOUBLE_EQ(row->self_us, self_ns / 1e3 / 2) << name;
    EXPECT_DOUBLE_EQ(row->total_us, total_ns / 1e3 / 2) << name;
    EXPECT_DOUBLE_EQ(row->top_level_calls, top_level) << name;
  };
  expect("A", 100 - 30 - 10, 100, 0.5);
  expect("B", 30 - 10, 30, 0);
  expect("C", 10, 10, 0);
  expect("D", 10, 10, 0);
  expect("E", 10, 10, 0.5);
  expect("F", 45, 45, 0.5);
  // By self time: A (60) first, F (45) second.
  ASSERT_EQ(summary.ops.size(), 6u);
  EXPECT_EQ(summary.ops[0].name, "A");
  EXPECT_EQ(summary.ops[1].name, "F");
}

TEST(RunProfile, ACallerThatStartsWithItsCalleeStillOwnsIt) {
  // Same start: the longer span is the caller; a span starting when another ends is its sibling.
  const bench::HostOpSummary summary =
      bench::summarize_host_ops({{7, 0, 10, "inner"}, {7, 0, 50, "outer"}, {7, 50, 60, "next"}}, 1);
  EXPECT_DOUBLE_EQ(find(summary.ops, "outer")->self_us, 40 / 1e3);
  EXPECT_DOUBLE_EQ(find(summary.ops, "inner")->top_level_calls, 0);
  EXPECT_DOUBLE_EQ(find(summary.ops, "next")->top_level_calls, 1);
  EXPECT_DOUBLE_EQ(summary.top_level_calls, 2);
}

TEST(RunProfile, CountsTheAtenCallsOfARealRun) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({64, 32}), w = torch::randn({16, 32}), y = torch::randn({64, 16});
  const bench::RunProfile profile = bench::profile_runs(
      [&] {
        torch::Tensor h = at::linear(x, w);  // no bias: linear -> matmul -> mm
        h = h.add(y);
        h = h.add(y);
      },
      /*runs=*/3, torch::kCPU, /*trace_path=*/"");
  EXPECT_EQ(profile.runs, 3);
  EXPECT_FALSE(profile.cuda);
  EXPECT_GT(profile.wall_us, 0);
  EXPECT_TRUE(profile.device_work.empty());
  EXPECT_DOUBLE_EQ(profile.host_top_level_calls, 3);  // linear, add, add
  const bench::ProfiledName* linear = find(profile.host_ops, "aten::linear");
  const bench::ProfiledName* add = find(profile.host_ops, "aten::add");
  const bench::ProfiledName* mm = find(profile.host_ops, "aten::mm");
  ASSERT_NE(linear, nullptr);
  ASSERT_NE(add, nullptr);
  ASSERT_NE(mm, nullptr);
  EXPECT_DOUBLE_EQ(linear->calls, 1);
  EXPECT_DOUBLE_EQ(linear->top_level_calls, 1);
  EXPECT_DOUBLE_EQ(add->calls, 2);
  EXPECT_DOUBLE_EQ(add->top_level_calls, 2);
  EXPECT_DOUBLE_EQ(mm->calls, 1);
  EXPECT_DOUBLE_EQ(mm->top_level_calls, 0);  // inside linear
  EXPECT_LT(linear->self_us, linear->total_us);
  EXPECT_GE(linear->total_us, mm->total_us);
  EXPECT_LE(profile.host_top_level_us, profile.wall_us);
}

TEST(RunProfile, MarkdownGivesTheFiguresPerRunAndEscapesNames) {
  bench::RunProfile profile;
  profile.runs = 2;
  profile.cuda = true;
  profile.wall_us = 1500;
  profile.host_calls = 7;
  profile.host_top_level_calls = 2.5;
  profile.host_top_level_us = 1200;
  profile.host_ops = {{"aten::mm", 3, 0.5, 700.25, 800}, {"a|b", 1, 1, 5, 5}};
  const std::string text = bench::profile_markdown(profile, "lightconv, fused");
  EXPECT_NE(text.find("# Profile: lightconv, fused\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- wall: 1.500 ms\n"), std::string::npos) << text;
  EXPECT_NE(text.find("- host: 2.50 top-level op calls taking 1.200 ms (summed over threads; 7 ops in all"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| aten::mm | 3 | 0.50 | 700.2 | 800.0 |\n"), std::string::npos) << text;
  EXPECT_NE(text.find("| a\\|b | 1 | 1 | 5.0 | 5.0 |\n"), std::string::npos) << text;
  // CUDA asked for and nothing recorded on the device: said, with how to see why.
  EXPECT_NE(text.find("no device activity was recorded"), std::string::npos) << text;

  profile.device_work = {{"gemm_kernel", 4, 4, 300, 300}, {"softmax_kernel", 1, 1, 100, 100}};
  profile.device_busy_us = 400;
  profile.kernels = 5;
  profile.runtime_launches = 5;
  profile.driver_launches = 2;
  profile.launch_api_us = 20;
  const std::string with_device = bench::profile_markdown(profile, "t", /*max_rows=*/1);
  EXPECT_NE(with_device.find("- device: busy 0.400 ms (kernels, memcpy and memset summed) in 5 kernels; launch "
                             "calls on the host: 5 to the runtime taking 0.020 ms, 2 to the driver\n"),
            std::string::npos)
      << with_device;
  EXPECT_NE(with_device.find("| gemm_kernel | 4 | 300.0 | 75.00 | 75.0% |\n"), std::string::npos) << with_device;
  EXPECT_EQ(with_device.find("softmax_kernel"), std::string::npos) << with_device;  // beyond max_rows
  EXPECT_NE(with_device.find("(1 more names)"), std::string::npos) << with_device;
  EXPECT_EQ(with_device.find("no device activity"), std::string::npos) << with_device;
}

TEST(RunProfile, WritesTheSummaryAndAChromeTraceIntoANewDirectory) {
  const std::string dir = testing::temp_dir() + "/profiles/nested";
  const torch::Tensor x = torch::randn({8, 8});
  const std::string summary = bench::write_profile(
      dir, "row-1", "a row", [&] { (void)x.mul(x); }, 2, torch::kCPU);
  EXPECT_EQ(summary, dir + "/row-1.md");
  const std::string text = testing::read_text(summary);
  EXPECT_NE(text.find("# Profile: a row\n"), std::string::npos) << text;
  EXPECT_NE(text.find("| aten::mul | 1 | 1 |"), std::string::npos) << text;
  const nlohmann::json trace = nlohmann::json::parse(testing::read_text(dir + "/row-1.trace.json"));
  ASSERT_TRUE(trace.contains("traceEvents"));
  bool saw_mul = false;
  for (const auto& event : trace["traceEvents"]) saw_mul |= event.value("name", "") == "aten::mul";
  EXPECT_TRUE(saw_mul);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {  // no temporaries left behind
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "row-1.md" || name == "row-1.trace.json") << name;
  }
}

TEST(RunProfile, RefusesADirectoryItCannotCreateAndZeroRuns) {
  const std::string file = testing::temp_dir() + "/plain-file";
  std::ofstream(file) << "x";
  try {
    bench::write_profile(
        file + "/sub", "row", "t", [] {}, 1, torch::kCPU);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file + "/sub: cannot create the --profile directory: "), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(bench::profile_runs([] {}, 0, torch::kCPU, ""), UsageError);
}

TEST(RunProfile, StemsKeepOnlyPortableCharacters) {
  EXPECT_EQ(bench::profile_stem("bert-small_composite.v2"), "bert-small_composite.v2");
  EXPECT_EQ(bench::profile_stem("a b/c:d"), "a_b_c_d");
}

}  // namespace
}  // namespace cabert
