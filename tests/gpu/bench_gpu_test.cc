// `cabert bench --device cuda` (label gpu): CUDA events time the device's work inside the wall clock of the same
// run; the op, model and encoder-decoder benches run on the device under both precisions and record the clock,
// the device and the caching allocator's peak. Skips without CUDA kernels in the build or a CUDA device.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "kernels/device_timing.h"
#include "lib/bench/model_bench.h"
#include "lib/bench/op_bench.h"
#include "lib/bench/run_timing.h"
#include "lib/bench/seq2seq_bench.h"
#include "lib/config/model_config_text.h"
#include "lib/io/record_file.h"
#include "lib/ops/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace cabert {
namespace {

// A row timed on CUDA: by events, within the wall clock of the same runs, with a peak from the caching allocator.
void expect_cuda_timing(const pb::BenchTiming& timing) {
  EXPECT_EQ(timing.clock(), "CUDA events");
  EXPECT_GT(timing.median_ms(), 0);
  EXPECT_LE(timing.median_ms(), timing.wall_median_ms() * 1.01 + 0.01);
  EXPECT_GT(timing.peak_extra_bytes(), 0);
  EXPECT_NE(timing.memory_method().find("CUDA caching allocator"), std::string::npos) << timing.memory_method();
}

// A model's record from cuda:0 in either precision: both of its rows timed on the device.
void expect_cuda_record(const pb::BenchRecord& record, bool amp) {
  EXPECT_EQ(record.device(), "cuda:0");
  EXPECT_EQ(record.dtype(), amp ? "bfloat16 autocast" : "float");
  expect_cuda_timing(record.train_timing());
  expect_cuda_timing(record.inference_timing());
}

TEST(CudaEventTiming, EventsTimeTheQueuedWorkWithinTheWallClock) {
  CABERT_REQUIRE_CUDA();
  const torch::Device cuda = testing::cuda0();
  const torch::Tensor a = torch::randn({2048, 2048}, torch::TensorOptions().device(cuda));
  torch::Tensor c = torch::mm(a, a);
  kernels::CudaEventMarks marks(0);
  bench::synchronize(cuda);
  const auto start = std::chrono::steady_clock::now();
  marks.mark();
  for (int i = 0; i < 20; ++i) torch::mm_out(c, a, a);  // about 0.3 TFLOP: milliseconds on any GPU
  marks.mark();
  torch::mm_out(c, a, a);
  marks.mark();
  const std::vector<double> intervals = marks.intervals_ms();  // waits for the last mark
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(intervals.size(), 2u);
  EXPECT_GT(intervals[0], 0);
  EXPECT_GT(intervals[1], 0);
  EXPECT_GT(intervals[0], intervals[1]) << "twenty products against one: the intervals in the marks' order";
  EXPECT_LE(intervals[0] + intervals[1], wall_ms * 1.01 + 0.01);
  EXPECT_TRUE(marks.intervals_ms().empty()) << "the marks are cleared";
  marks.reserve(4);  // the three events above are reused, one more created
  marks.mark();
  torch::mm_out(c, a, a);
  marks.mark();
  const std::vector<double> again = marks.intervals_ms();
  ASSERT_EQ(again.size(), 1u) << "reused events time the new marks";
  EXPECT_GT(again[0], 0);

  const bench::RunTime time = bench::time_run([&] { torch::mm_out(c, a, a); }, cuda);
  EXPECT_GT(time.ms, 0);
  EXPECT_LE(time.ms, time.wall_ms * 1.01 + 0.01);
}

TEST(CudaBench, OpRowsAreTimedByEventsWithTheWallClockBeside) {
  CABERT_REQUIRE_CUDA();
  bench::OpBenchConfig config;
  config.op = "dynamicconv";
  config.batch = 4, config.seq = 256, config.channels = 64, config.heads = 4, config.kernel = 7;
  config.backward = true, config.warmup = 1, config.repeats = 3;
  config.device = testing::cuda0();
  expect_cuda_timing(bench::bench_op(config));
}

TEST(CudaBench, ModelStepsRunOnTheDeviceInBothPrecisions) {
  CABERT_REQUIRE_CUDA();
  bench::ModelBenchConfig config;
  config.model = config::load_model_config("bert-tiny-composite", {});
  config.model_name = "bert-tiny-composite";
  config.batch = 2, config.seq = 32, config.warmup = 1, config.repeats = 2;
  config.device = testing::cuda0();
  for (bool amp : {false, true}) {
    config.amp = amp;
    const std::vector<pb::BenchRecord> records = bench::bench_model(config);
    ASSERT_EQ(records.size(), 2u);
    for (const pb::BenchRecord& record : records) {
      expect_cuda_record(record, amp);
      EXPECT_GT(record.matmul_gflops(), 0);
      EXPECT_EQ(record.note().find("matmul_gflops a bfloat16 product") != std::string::npos, amp) << record.note();
    }
    EXPECT_GT(records[1].speedup_vs_reference(), 0);
  }
}

TEST(CudaBench, EncoderDecoderTrainsAndGeneratesOnTheDevice) {
  CABERT_REQUIRE_CUDA();
  bench::Seq2SeqBenchConfig config;
  config.model = config::load_model_config("wu-lightconv-tiny", {});
  config.model_name = "wu-lightconv-tiny";
  config.batch = 2, config.length = 20, config.warmup = 1, config.repeats = 2;
  config.device = testing::cuda0();
  for (bool amp : {false, true}) {
    config.amp = amp;
    const pb::BenchRecord record = bench::bench_seq2seq_model(config);
    expect_cuda_record(record, amp);
    EXPECT_GT(record.generation_step_ms_first(), 0);
    EXPECT_GT(record.generation_step_ms_last(), 0);
    EXPECT_LT(record.generation_step_ms_first() + record.generation_step_ms_last(),
              record.inference_timing().median_ms());
  }
}

TEST(CudaBench, ModelCommandWritesCudaRecords) {
  CABERT_REQUIRE_CUDA();
  EXPECT_EQ(ops::indexed_device(torch::Device(torch::kCUDA)), testing::cuda0()) << "--device cuda: the current one";
  const std::string records = testing::temp_dir() + "/model.bench";
  ASSERT_TRUE(testing::runs(str(CABERT_BINARY,
                                " -q bench --model bert-tiny-composite --device cuda --amp --seq 16 "
                                "--batch 2 --repeats 1 --warmup 0 -o ",
                                records, " > ", testing::temp_dir(), "/model.md")));
  const std::string table = testing::read_text(testing::temp_dir() + "/model.md");
  EXPECT_NE(table.find("on cuda:0 ("), std::string::npos) << table;
  EXPECT_NE(table.find("times: CUDA events"), std::string::npos) << table;
  EXPECT_NE(table.find("bfloat16 autocast"), std::string::npos) << table;
  io::RecordReader reader(records);
  reader.expect("cabert.pb.BenchRecord");
  pb::BenchRecord record;
  int count = 0;
  while (reader.next(&record)) {
    ++count;
    EXPECT_EQ(record.device(), "cuda:0");
    EXPECT_EQ(record.dtype(), "bfloat16 autocast");
    EXPECT_EQ(record.train_timing().clock(), "CUDA events");
  }
  EXPECT_EQ(count, 2) << "a record per kernel path";
}

}  // namespace
}  // namespace cabert
