// lib/bench/run_timing: the clocks, one timed run, the record of a row's runs, and the benches' records naming
// their clock, device and precision (the CPU here; tests/gpu/bench_gpu_test.cc has CUDA's events).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lib/bench/model_bench.h"
#include "lib/bench/op_bench.h"
#include "lib/bench/run_timing.h"
#include "lib/bench/seq2seq_bench.h"
#include "lib/config/model_config_text.h"
#include "lib/ops/memory_meter.h"

namespace cabert {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(DeviceClock, CpuIntervalsAreTheWallTimeBetweenMarksThenCleared) {
  bench::DeviceClock clock(torch::kCPU);
  clock.mark();
  sleep_ms(30);
  clock.mark();
  clock.mark();
  const std::vector<double> intervals = clock.intervals_ms();
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_GE(intervals[0], 30.0) << "sleep_for sleeps at least as long as asked";
  EXPECT_GE(intervals[1], 0.0);
  EXPECT_TRUE(clock.intervals_ms().empty()) << "the marks are cleared";
  clock.mark();
  EXPECT_TRUE(clock.intervals_ms().empty()) << "one mark has no interval";
}

TEST(DeviceClock, NamesAndIndices) {
  EXPECT_STREQ(bench::clock_name(torch::kCPU), "wall clock");
  EXPECT_STREQ(bench::clock_name(torch::Device(torch::kCUDA, 1)), "CUDA events");
  EXPECT_EQ(bench::cuda_index(torch::kCPU), -1);
  EXPECT_EQ(bench::cuda_index(torch::Device(torch::kCUDA, 3)), 3);
}

TEST(TimeRun, OnTheCpuBothTimesAreTheWallClock) {
  int calls = 0;
  const bench::RunTime time = bench::time_run(
      [&] {
        ++calls;
        sleep_ms(20);
      },
      torch::kCPU);
  EXPECT_EQ(calls, 1);
  EXPECT_GE(time.ms, 20.0);
  EXPECT_EQ(time.ms, time.wall_ms);
}

TEST(MakeTiming, StatisticsOfTheClockAndTheWallMedianBeside) {
  bench::TimedRuns runs(torch::Device(torch::kCUDA, 0));  // no device needed: only the clock's name is read
  runs.add({3, 7});
  runs.add({1, 4});
  runs.add({2, 6});
  const pb::BenchTiming timing = bench::make_timing(runs, 2, 1234, "how");
  EXPECT_EQ(timing.clock(), "CUDA events");
  EXPECT_EQ(timing.repeats(), 3);
  EXPECT_DOUBLE_EQ(timing.median_ms(), 2);
  EXPECT_DOUBLE_EQ(timing.min_ms(), 1);
  EXPECT_DOUBLE_EQ(timing.max_ms(), 3);
  EXPECT_DOUBLE_EQ(timing.q1_ms(), 1.5);
  EXPECT_DOUBLE_EQ(timing.q3_ms(), 2.5);
  EXPECT_DOUBLE_EQ(timing.wall_median_ms(), 6);
  EXPECT_EQ(timing.warmup(), 2);
  EXPECT_EQ(timing.peak_extra_bytes(), 1234);
  EXPECT_EQ(timing.memory_method(), "how");
}

TEST(MemoryMethod, NamesWhatThePeakIsAboveAndWhoCountedIt) {
  EXPECT_EQ(bench::memory_method(torch::kCPU, "the inputs during one extra run"),
            "peak CPU tensor bytes above the inputs during one extra run (counting c10 allocator; oneDNN/BLAS "
            "scratch not counted)");
  EXPECT_EQ(bench::memory_method(torch::Device(torch::kCUDA, 0), "the model"),
            "peak bytes the CUDA caching allocator handed out above the model (cuBLAS/cuDNN workspaces outside it "
            "not counted)");
  EXPECT_EQ(bench::device_words(torch::kCPU), "the CPU");
  EXPECT_EQ(bench::device_words(torch::Device(torch::kCUDA, 1)), "cuda:1");
}

TEST(PeakExtraBytesOn, CpuCountsTheTensorsARunHolds) {
  ops::install_cpu_memory_meter();
  const int64_t peak = bench::peak_extra_bytes_on(
      [] {
        const torch::Tensor a = torch::empty({1000}, torch::kFloat);  // 4000 bytes
        const torch::Tensor b = torch::empty({250}, torch::kDouble);  // 2000 bytes, both alive at once
      },
      torch::kCPU);
  EXPECT_EQ(peak, 6000);
}

TEST(BenchRecords, OpTimingOnTheCpuNamesTheWallClock) {
  bench::OpBenchConfig config;
  config.op = "lightconv";
  config.batch = 2, config.seq = 6, config.channels = 8, config.heads = 2, config.kernel = 3;
  config.warmup = 0, config.repeats = 3;
  const pb::BenchTiming timing = bench::bench_op(config);
  EXPECT_EQ(timing.clock(), "wall clock");
  EXPECT_DOUBLE_EQ(timing.wall_median_ms(), timing.median_ms());
}

TEST(BenchRecords, ModelUnderAutocastRecordsItsPrecisionDeviceAndClock) {
  bench::ModelBenchConfig config;
  config.model = config::load_model_config("bert-tiny-composite", {});
  config.model_name = "bert-tiny-composite";
  config.batch = 2, config.seq = 16, config.warmup = 0, config.repeats = 1;
  config.paths = {ops::KernelPath::kFused};
  config.amp = true;
  const std::vector<pb::BenchRecord> records = bench::bench_model(config);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].dtype(), "bfloat16 autocast");
  EXPECT_EQ(records[0].device(), "cpu");
  EXPECT_EQ(records[0].train_timing().clock(), "wall clock");
  EXPECT_EQ(records[0].inference_timing().clock(), "wall clock");
  EXPECT_GT(records[0].train_timing().peak_extra_bytes(), 0);
  EXPECT_GT(records[0].matmul_gflops(), 0.1);
  EXPECT_NE(records[0].note().find("bfloat16 autocast"), std::string::npos) << records[0].note();
  config.amp = false;
  EXPECT_EQ(bench::bench_model(config)[0].dtype(), "float");
}

TEST(BenchRecords, Seq2SeqUnderAutocastTimesEveryDecodingStep) {
  bench::Seq2SeqBenchConfig config;
  config.model = config::load_model_config("wu-lightconv-tiny", {});
  config.model_name = "wu-lightconv-tiny";
  config.batch = 2, config.length = 12, config.warmup = 0, config.repeats = 1;
  config.amp = true;
  const pb::BenchRecord record = bench::bench_seq2seq_model(config);
  EXPECT_EQ(record.kind(), "seq2seq");
  EXPECT_EQ(record.dtype(), "bfloat16 autocast");
  EXPECT_EQ(record.device(), "cpu");
  EXPECT_EQ(record.inference_timing().clock(), "wall clock");
  EXPECT_GT(record.generation_step_ms_first(), 0);
  EXPECT_GT(record.generation_step_ms_last(), 0);
  // A tenth of 12 steps is one step at each end: together they are part of the whole generation.
  EXPECT_LT(record.generation_step_ms_first() + record.generation_step_ms_last(),
            record.inference_timing().median_ms());
}

}  // namespace
}  // namespace cabert
