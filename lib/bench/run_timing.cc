#include "lib/bench/run_timing.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cmath>

#include "kernels/build_info.h"
#include "lib/core/errors.h"
#include "lib/ops/device.h"
#include "lib/ops/memory_meter.h"

namespace cabert::bench {

DeviceClock::DeviceClock(const torch::Device& device) : device_(device) {
  if (device.is_cuda()) events_ = std::make_unique<kernels::CudaEventMarks>(cuda_index(device));
}

void DeviceClock::reserve(int marks) {
  if (events_) {
    events_->reserve(marks);
  } else {
    wall_.reserve(wall_.size() + static_cast<size_t>(marks));
  }
}

void DeviceClock::mark() {
  if (events_) {
    events_->mark();
  } else {
    wall_.push_back(std::chrono::steady_clock::now());
  }
}

std::vector<double> DeviceClock::intervals_ms() {
  if (events_) return events_->intervals_ms();
  std::vector<double> intervals;
  for (size_t i = 1; i < wall_.size(); ++i) {
    intervals.push_back(std::chrono::duration<double, std::milli>(wall_[i] - wall_[i - 1]).count());
  }
  wall_.clear();
  return intervals;
}

const char* clock_name(const torch::Device& device) { return device.is_cuda() ? "CUDA events" : "wall clock"; }

int cuda_index(const torch::Device& device) {
  if (!device.is_cuda()) return -1;
  return ops::indexed_device(device).index();
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(cuda_index(device));
}

double elapsed_ms(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

RunTime time_run(const std::function<void()>& run, const torch::Device& device) {
  RunTime time;
  if (!device.is_cuda()) {
    time.ms = time.wall_ms = elapsed_ms(run);
    return time;
  }
  synchronize(device);
  DeviceClock clock(device);
  clock.reserve(2);  // both events created before the run: the marks only record
  time.wall_ms = elapsed_ms([&] {
    clock.mark();
    run();
    clock.mark();
    time.ms = clock.intervals_ms().at(0);  // waits for the second mark: the run's last kernel
  });
  return time;
}

int64_t peak_extra_bytes_of(const std::function<void()>& run) {
  ops::PeakMemoryScope memory;
  run();
  return memory.peak_extra_bytes();
}

int64_t peak_extra_bytes_on(const std::function<void()>& run, const torch::Device& device) {
  if (!device.is_cuda()) return peak_extra_bytes_of(run);
  const int index = cuda_index(device);
  synchronize(device);
  kernels::reset_cuda_peak_memory(index);
  const int64_t before = kernels::cuda_peak_memory_bytes(index);  // after a reset: what is allocated now
  run();
  synchronize(device);
  return kernels::cuda_peak_memory_bytes(index) - before;
}

std::string memory_method(const torch::Device& device, const std::string& what) {
  return device.is_cuda()
             ? str("peak bytes the CUDA caching allocator handed out above ", what,
                   " (cuBLAS/cuDNN workspaces outside it not counted)")
             : str("peak CPU tensor bytes above ", what, " (counting c10 allocator; oneDNN/BLAS scratch not counted)");
}

std::string device_words(const torch::Device& device) { return device.is_cuda() ? device.str() : "the CPU"; }

pb::BenchTiming summarize_times(std::vector<double> ms) {
  pb::BenchTiming timing;
  if (ms.empty()) return timing;
  std::sort(ms.begin(), ms.end());
  auto quantile = [&](double p) {
    const double position = p * static_cast<double>(ms.size() - 1);
    const size_t low = static_cast<size_t>(std::floor(position));
    const size_t high = std::min(low + 1, ms.size() - 1);
    return ms[low] + (ms[high] - ms[low]) * (position - static_cast<double>(low));
  };
  timing.set_repeats(static_cast<int>(ms.size()));
  timing.set_median_ms(quantile(0.5));
  timing.set_q1_ms(quantile(0.25));
  timing.set_q3_ms(quantile(0.75));
  timing.set_min_ms(ms.front());
  timing.set_max_ms(ms.back());
  return timing;
}

pb::BenchTiming make_timing(const TimedRuns& runs, int warmup, int64_t peak_extra_bytes,
                            const std::string& memory_method) {
  pb::BenchTiming timing = summarize_times(runs.ms);
  timing.set_warmup(warmup);
  timing.set_peak_extra_bytes(peak_extra_bytes);
  timing.set_memory_method(memory_method);
  timing.set_clock(runs.clock);
  timing.set_wall_median_ms(summarize_times(runs.wall_ms).median_ms());
  return timing;
}

}  // namespace cabert::bench
