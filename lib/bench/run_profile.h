// Where a benchmarked run's time goes, for `cabert bench --profile DIR`: a few more runs of it under PyTorch's
// profiler (Kineto), summarised per host op (self time: its own time less that of the ops it called) and per
// device kernel, with the counts that say whether a run is launch-bound (top-level ATen calls and kernel
// launches per run against the device's busy time). Written as a Markdown summary beside Kineto's Chrome trace.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cabert::bench {

// One op or kernel name, its figures per run.
struct ProfiledName {
  std::string name;
  double calls = 0;            // calls per run
  double top_level_calls = 0;  // host ops: calls not made inside another op of the same thread
  double self_us = 0;          // host ops: own time; device work: the same as total_us
  double total_us = 0;         // including the ops it called (an op nested in itself counts twice)
};

struct RunProfile {
  int runs = 0;
  bool cuda = false;   // whether device activity was asked for
  double wall_us = 0;  // per run, the profiler's own overhead included
  // Host side (ops recorded by ATen's RecordFunction, autograd's nodes included), by self time.
  std::vector<ProfiledName> host_ops;
  double host_calls = 0, host_top_level_calls = 0, host_top_level_us = 0;
  // CUDA: kernels, memcpy and memset on the device, by time; the launch calls on the host, the runtime's
  // (cudaLaunchKernel...) and the driver's (cuLaunchKernel...) counted apart: CUPTI may report a runtime launch's
  // own driver call too, and libraries may launch through the driver alone.
  std::vector<ProfiledName> device_work;
  double device_busy_us = 0, kernels = 0, runtime_launches = 0, driver_launches = 0, launch_api_us = 0;
};

// One host op's interval as the profiler recorded it (ns on one clock; the thread PyTorch's RecordFunction saw).
struct HostOpSpan {
  uint64_t thread = 0, start_ns = 0, end_ns = 0;
  std::string name;
};
struct HostOpSummary {
  std::vector<ProfiledName> ops;  // by self time
  double calls = 0, top_level_calls = 0, top_level_us = 0;
};
// Per-run figures of `runs` runs' spans. A thread's ops nest in time (an op's callees run inside its interval):
// an op's caller is the latest-starting op of its thread still open when it starts, its self time its duration
// less its direct callees', and an op without a caller is a top-level call.
HostOpSummary summarize_host_ops(std::vector<HostOpSpan> spans, int runs);

// `runs` calls of `run` under the profiler (CPU ops; CUDA activity too when `device` is a CUDA device, with the
// device synchronised before the profiler stops). Kineto's Chrome trace goes to `trace_path` unless it is empty.
RunProfile profile_runs(const std::function<void()>& run, int runs, const c10::Device& device,
                        const std::string& trace_path);

// The summary: the per-run totals, then the device work and the host ops by time (at most `max_rows` each).
std::string profile_markdown(const RunProfile& profile, const std::string& title, size_t max_rows = 30);

// profile_runs into DIR/STEM.trace.json and DIR/STEM.md (DIR created when missing; both written atomically).
// Returns the summary's path.
std::string write_profile(const std::string& dir, const std::string& stem, const std::string& title,
                          const std::function<void()>& run, int runs, const c10::Device& device);

// What `bench --profile DIR --profile-runs N` asks of a bench; nothing while dir is empty.
struct ProfileRequest {
  std::string dir;
  int runs = 3;
};

// When the request has a directory: write_profile of `run` there, the stem made portable (profile_stem), and the
// summary's path logged.
void profile_if_asked(const ProfileRequest& request, const std::string& stem, const std::string& title,
                      const std::function<void()>& run, const c10::Device& device);

// `text` as a file name stem: characters other than letters, digits, '.', '_' and '-' become '_'.
std::string profile_stem(const std::string& text);

}  // namespace cabert::bench
