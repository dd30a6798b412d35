// `cabert bench --op`: the table, the record file, and usage errors, on tiny sizes (no timing assertions).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "formats/bench.pb.h"
#include "lib/bench/model_bench.h"
#include "lib/bench/op_bench.h"
#include "lib/config/model_config_text.h"
#include "lib/config/presets.h"
#include "lib/config/validation.h"
#include "lib/core/errors.h"
#include "lib/core/run_context.h"
#include "lib/io/record_file.h"
#include "lib/models/pretraining_models.h"
#include "lib/models/summary.h"
#include "lib/ops/memory_meter.h"
#include "tests/test_paths.h"

namespace cabert {
namespace {

int64_t count_parameters_of(const pb::ModelConfig& config) {
  return models::count_parameters(*models::MlmModel(config));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(BenchCommand, WritesTableAndRecordsForBothKernelPaths) {
  const std::string records = testing::temp_dir() + "/bench.cabert";
  auto result = testing::run_command(testing::cabert_binary() +
                                     " -q --threads 1 bench --op lightconv,attention,relpos --seq 5,9 --kernel 3 "
                                     "--batch 2 --channels 8 --heads 2 --backward --repeats 2 --warmup 1 "
                                     "--format tsv -o " +
                                     records);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto lines = lines_of(result.out);
  // header, then op by op, seq by seq: lightconv reference/fused x 2, attention once x 2, relpos x 4
  ASSERT_EQ(lines.size(), 1u + 2 * 5) << result.out;
  EXPECT_EQ(lines[0].substr(0, 15), "op\tkernels\tpass");
  EXPECT_EQ(lines[1].substr(0, 29), "lightconv\treference\tfwd+bwd\t2");
  EXPECT_EQ(lines[2].substr(0, 25), "lightconv\tfused\tfwd+bwd\t2");
  EXPECT_NE(lines[2].find('x', lines[2].rfind('\t')), std::string::npos) << "fused rows carry a speed-up";
  EXPECT_EQ(lines[3].substr(0, 29), "lightconv\treference\tfwd+bwd\t2");
  EXPECT_EQ(lines[5].substr(0, 15), "attention\taten\t");

  io::RecordReader reader(records);
  reader.expect("cabert.pb.BenchRecord");
  pb::BenchRecord record;
  int count = 0, with_speedup = 0;
  while (reader.next(&record)) {
    ++count;
    EXPECT_EQ(record.kind(), "op");
    EXPECT_EQ(record.timing().repeats(), 2);
    EXPECT_LE(record.timing().min_ms(), record.timing().median_ms());
    EXPECT_LE(record.timing().median_ms(), record.timing().max_ms());
    EXPECT_GT(record.timing().peak_extra_bytes(), 0);
    EXPECT_EQ(record.environment().intra_op_threads(), 1);
    EXPECT_FALSE(record.environment().libtorch_version().empty());
    EXPECT_FALSE(record.environment().git_commit().empty());
    EXPECT_EQ(record.environment().git_commit(), cabert_build_commit());  // the binary's, not the checkout's
    EXPECT_FALSE(record.environment().cpu_model().empty());
    if (record.speedup_vs_reference() > 0) ++with_speedup;
  }
  EXPECT_EQ(count, 10);
  EXPECT_EQ(with_speedup, 4);
}

TEST(BenchCommand, UnknownOpAndBadPathAreUsageErrors) {
  auto result = testing::run_command(testing::cabert_binary() + " bench --op fastconv --seq 4");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(
      result.err.find("--op: expected one of lightconv, dynamicconv, sdconv, sdconv-branch, relpos, "
                      "convbert-attention, depthwise, attention, composite-attention, sdpa, dropout, torch-dropout, "
                      "got 'fastconv'"),
      std::string::npos)
      << result.err;
  result = testing::run_command(testing::cabert_binary() + " bench --op lightconv --seq 4 --kernels turbo");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--kernels: expected fused or reference, got 'turbo'"), std::string::npos) << result.err;
  result = testing::run_command(testing::cabert_binary() + " --cuda-attention flash bench --op lightconv --seq 4");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--cuda-attention: expected auto, regions, blocks or tiles, got 'flash'"),
            std::string::npos)
      << result.err;
  result = testing::run_command(testing::cabert_binary() + " --cuda-attention blocks bench --op composite-attention "
                                                           "--seq 4 --repeats 1 --warmup 0");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  result = testing::run_command(testing::cabert_binary() + " bench --op lightconv --seq 4 --channels 10 --heads 4");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("expected --channels divisible by --heads, got 10 and 4"), std::string::npos) << result.err;
}

TEST(BenchCommand, AmpTimesModelsUnderAutocastAndIsRefusedForOps) {
  auto result = testing::run_command(testing::cabert_binary() + " bench --op lightconv --seq 4 --amp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--op excludes --amp"), std::string::npos) << result.err;
  result = testing::run_command(testing::cabert_binary() +
                                " -q --threads 1 bench --model bert-tiny-composite --kernels fused --seq 8 --batch 1 "
                                "--repeats 1 --warmup 0 --amp --format json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("\"dtype\":\"bfloat16 autocast\""), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("\"device\":\"cpu\""), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("\"clock\":\"wall clock\""), std::string::npos) << result.out;
}

TEST(BenchOps, EveryOpRunsOnEveryPathWithEvenAndOddKernels) {
  for (const std::string& op : bench::op_bench_names()) {
    for (ops::KernelPath path : {ops::KernelPath::kReference, ops::KernelPath::kFused}) {
      for (int64_t kernel : {3, 4}) {
        bench::OpBenchConfig config;
        config.op = op;
        config.batch = 2, config.seq = 6, config.channels = 8, config.heads = 2, config.kernel = kernel;
        config.backward = true, config.path = path, config.warmup = 0, config.repeats = 2;
        pb::BenchTiming timing = bench::bench_op(config);
        EXPECT_EQ(timing.repeats(), 2) << op;
        EXPECT_GT(timing.peak_extra_bytes(), 0) << op;
        EXPECT_EQ(ops::kernel_path(), ops::KernelPath::kFused) << op << ": the process-wide path is restored";
      }
    }
  }
}

TEST(BenchModel, OneRecordPerPathWithSpeedUpParametersAndFlops) {
  bench::ModelBenchConfig config;
  config.model = config::load_model_config("bert-tiny-composite", {});
  config.model_name = "bert-tiny-composite";
  config.batch = 2, config.seq = 16, config.warmup = 0, config.repeats = 2;
  std::vector<pb::BenchRecord> records = bench::bench_model(config);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kernels(), "reference");
  EXPECT_EQ(records[1].kernels(), "fused");
  EXPECT_EQ(records[0].speedup_vs_reference(), 0);
  EXPECT_NEAR(records[1].speedup_vs_reference(),
              records[0].train_timing().median_ms() / records[1].train_timing().median_ms(), 1e-9);
  for (const auto& record : records) {
    EXPECT_EQ(record.kind(), "model");
    EXPECT_EQ(record.parameters(), count_parameters_of(config.model));
    EXPECT_EQ(record.train_timing().repeats(), 2);
    EXPECT_EQ(record.inference_timing().repeats(), 2);
    EXPECT_GT(record.train_timing().peak_extra_bytes(), 0);
    EXPECT_NEAR(record.train_tokens_per_second(), 32 / (record.train_timing().median_ms() / 1000), 1e-6);
    // Training counted as 3 forward passes of the analytic FLOPs; the peak is a positive measured rate.
    EXPECT_NEAR(record.train_gflops_per_second(),
                3 * record.flops_per_token() * 32 / (record.train_timing().median_ms() / 1000) / 1e9, 1e-9);
    EXPECT_GT(record.matmul_gflops(), 0.1);
    EXPECT_EQ(record.matmul_gflops(), records[0].matmul_gflops()) << "one peak per run, shared by the paths";
    // At least the encoder's linear layers: 2 x (4 H^2 + 2 H I) multiply-adds per token and layer.
    const double H = config.model.hidden_size(), I = config.model.intermediate_size();
    EXPECT_GE(record.flops_per_token(), 2 * config.model.num_layers() * (4 * H * H + 2 * H * I));
  }
  EXPECT_EQ(ops::kernel_path(), ops::KernelPath::kFused) << "the process-wide path is restored";
  config.seq = config.model.max_length() + 1;
  try {
    bench::bench_model(config);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--seq " + std::to_string(config.seq) + " exceeds max_length " +
                  std::to_string(config.model.max_length()) +
                  " of bert-tiny-composite; raise it with --set max_length=" + std::to_string(config.seq));
  }
}

TEST(BenchEnvironment, NamesTheAllocator) {
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string saved_preload = preload != nullptr ? preload : "";
  unsetenv("LD_PRELOAD");
  setenv("MALLOC_ARENA_MAX", "3", 1);
  EXPECT_NE(bench::bench_environment().allocator().find("glibc malloc"), std::string::npos);
  EXPECT_NE(bench::bench_environment().allocator().find("MALLOC_ARENA_MAX=3"), std::string::npos);
  unsetenv("MALLOC_ARENA_MAX");
  setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", 1);
  EXPECT_EQ(bench::bench_environment().allocator(), "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4");
  if (saved_preload.empty()) {
    unsetenv("LD_PRELOAD");
  } else {
    setenv("LD_PRELOAD", saved_preload.c_str(), 1);
  }
}

TEST(BenchStatistics, QuartilesOfKnownSamples) {
  pb::BenchTiming t = bench::summarize_times({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(t.median_ms(), 3);
  EXPECT_DOUBLE_EQ(t.q1_ms(), 2);
  EXPECT_DOUBLE_EQ(t.q3_ms(), 4);
  EXPECT_DOUBLE_EQ(t.min_ms(), 1);
  EXPECT_DOUBLE_EQ(t.max_ms(), 5);
  t = bench::summarize_times({1, 2});
  EXPECT_DOUBLE_EQ(t.median_ms(), 1.5);
}

TEST(BenchMemoryMeter, CountsTensorBytesAndPeak) {
  ops::install_cpu_memory_meter();
  ops::PeakMemoryScope scope;
  const int64_t before = ops::cpu_tensor_bytes();
  {
    auto a = torch::empty({1000}, torch::kFloat);  // 4000 bytes
    auto b = torch::empty({500}, torch::kDouble);  // 4000 bytes
    EXPECT_EQ(ops::cpu_tensor_bytes() - before, 8000);
  }
  EXPECT_EQ(ops::cpu_tensor_bytes(), before);
  EXPECT_EQ(scope.peak_extra_bytes(), 8000);
}

}  // namespace
}  // namespace cabert
