// How every bench times a run and measures its memory on the device it runs on. On the CPU: the wall clock, and
// the tensor bytes the counting c10 allocator sees (lib/ops/memory_meter.h). On CUDA: timing events on the
// device's current stream (kernels/device_timing.h), with the wall clock of the same runs beside them, and the
// caching allocator's peak.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/bench.pb.h"
#include "kernels/device_timing.h"

namespace cabert::bench {

// Marks on one device's timeline: steady-clock readings on the CPU, timing events on CUDA (where a mark
// completes when the work queued before it has, so an interval is device time, host gaps between kernels
// included).
class DeviceClock {
 public:
  explicit DeviceClock(const torch::Device& device);
  // Room for `marks` marks ahead (CUDA: their events created now, so that mark() only records).
  void reserve(int marks);
  void mark();
  // Milliseconds between each mark and the next, in order; then the marks are cleared. CUDA: waits for the last.
  std::vector<double> intervals_ms();

 private:
  torch::Device device_;
  std::vector<std::chrono::steady_clock::time_point> wall_;
  std::unique_ptr<kernels::CudaEventMarks> events_;
};

// The clock DeviceClock reads on `device`, as BenchTiming.clock records it: "wall clock" or "CUDA events".
const char* clock_name(const torch::Device& device);
// The CUDA device index of `device` (its own, else the current CUDA device's); -1 for the CPU.
int cuda_index(const torch::Device& device);
// Waits for every stream of a CUDA device; nothing on the CPU.
void synchronize(const torch::Device& device);

// One timed run: ms on the device's clock; wall_ms the wall clock from just before run() until its work is done.
// On CUDA the device is synchronised first, so nothing queued earlier falls into either.
struct RunTime {
  double ms = 0, wall_ms = 0;
};
RunTime time_run(const std::function<void()>& run, const torch::Device& device);

// The timed runs of one row, and the clock their ms came from.
struct TimedRuns {
  explicit TimedRuns(const torch::Device& device) : clock(clock_name(device)) {}
  std::string clock;
  std::vector<double> ms, wall_ms;
  void add(const RunTime& time) {
    ms.push_back(time.ms);
    wall_ms.push_back(time.wall_ms);
  }
};

// Wall-clock milliseconds of one call (the CPU's time_run).
double elapsed_ms(const std::function<void()>& run);
// Peak tensor bytes one call allocates above what exists before it: on the CPU the counting allocator's
// (lib/ops/memory_meter.h, installed by the benches), on CUDA the caching allocator's, synchronised.
int64_t peak_extra_bytes_of(const std::function<void()>& run);
int64_t peak_extra_bytes_on(const std::function<void()>& run, const torch::Device& device);

// The memory_method of a record's peak on `device`: above what ("the inputs during one extra run", ...) and by
// which allocator.
std::string memory_method(const torch::Device& device, const std::string& what);
// Where a row ran, for profile titles: "cuda:0", or "the CPU".
std::string device_words(const torch::Device& device);

// Summary statistics of a list of durations in milliseconds.
pb::BenchTiming summarize_times(std::vector<double> milliseconds);
// The record of a row's timed runs: the statistics of their ms, the clock, the median of their wall times, the
// warm-up count, and the peak with how it was measured.
pb::BenchTiming make_timing(const TimedRuns& runs, int warmup, int64_t peak_extra_bytes,
                            const std::string& memory_method);

}  // namespace cabert::bench
