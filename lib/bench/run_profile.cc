#include "lib/bench/run_profile.h"

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include "lib/core/errors.h"
#include "lib/core/files.h"
#include "lib/core/log.h"

// Kineto's ConfigLoader (libkineto/src/ConfigLoader.h, not among the wheel's headers): its two members that
// libtorch_cpu exports and stop_kineto_config_thread() calls.
namespace libkineto {
class ConfigLoader {
 public:
  static ConfigLoader& instance();
  void stopThread();
};
}  // namespace libkineto

namespace cabert::bench {
namespace {

namespace kineto_profiler = torch::autograd::profiler;
namespace profiler_impl = torch::profiler::impl;
using libkineto::ActivityType;

// The first profiling starts Kineto's config thread, which polls a config file and a daemon for on-demand traces
// for the life of the process. On a loaded machine its first pass ran late, into the process's exit, and raced
// with the static destructors: the heap was corrupted now and then ("corrupted double-linked list" after the
// last output was written; 3 to 10 runs in 300 of a profiling test with three in parallel on 2 cores, none when
// the exit waited 300 ms). cabert takes no on-demand traces: the thread is stopped, and joined, once a profile
// is taken (profiling again later does not restart it).
void stop_kineto_config_thread() { libkineto::ConfigLoader::instance().stopThread(); }

bool is_host_op(uint8_t type) {
  return type == static_cast<uint8_t>(ActivityType::CPU_OP) ||
         type == static_cast<uint8_t>(ActivityType::USER_ANNOTATION);
}
bool is_device_work(uint8_t type) {
  return type == static_cast<uint8_t>(ActivityType::CONCURRENT_KERNEL) ||
         type == static_cast<uint8_t>(ActivityType::GPU_MEMCPY) ||
         type == static_cast<uint8_t>(ActivityType::GPU_MEMSET);
}

struct Totals {
  int64_t calls = 0, top_level_calls = 0;
  double self_ns = 0, total_ns = 0;
};

std::vector<ProfiledName> per_run(const std::map<std::string, Totals>& totals, int runs, bool by_self) {
  std::vector<ProfiledName> rows;
  for (const auto& [name, t] : totals) {
    rows.push_back({name, static_cast<double>(t.calls) / runs, static_cast<double>(t.top_level_calls) / runs,
                    t.self_ns / 1e3 / runs, t.total_ns / 1e3 / runs});
  }
  std::stable_sort(rows.begin(), rows.end(), [by_self](const ProfiledName& a, const ProfiledName& b) {
    return by_self ? a.self_us > b.self_us : a.total_us > b.total_us;
  });
  return rows;
}

std::string number(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// Calls per run: whole numbers as such, fractions (an op that ran in some runs only) with two decimals.
std::string calls_text(double calls) {
  return calls == static_cast<double>(static_cast<int64_t>(calls)) ? std::to_string(static_cast<int64_t>(calls))
                                                                   : number(calls, 2);
}

// A name as one Markdown cell: '|' escaped, C++ kernel names cut at 140 characters.
std::string cell(const std::string& name) {
  std::string out;
  for (char c : name.size() > 140 ? name.substr(0, 137) + "..." : name) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c == '\n' ? ' ' : c;
    }
  }
  return out;
}

}  // namespace

HostOpSummary summarize_host_ops(std::vector<HostOpSpan> spans, int runs) {
  // By thread, then by start, the longer first on a tie (a caller before a callee that starts with it).
  std::sort(spans.begin(), spans.end(), [](const HostOpSpan& a, const HostOpSpan& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    return a.end_ns > b.end_ns;
  });
  std::map<std::string, Totals> totals;
  std::vector<double> callee_ns(spans.size(), 0);
  std::vector<size_t> open;  // the ops of the current thread still open, innermost last
  int64_t top_level = 0;
  double top_level_ns = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const HostOpSpan& span = spans[i];
    while (!open.empty() && (spans[open.back()].thread != span.thread || spans[open.back()].end_ns <= span.start_ns)) {
      open.pop_back();
    }
    const double duration = static_cast<double>(span.end_ns - span.start_ns);
    Totals& t = totals[span.name];
    ++t.calls;
    t.total_ns += duration;
    if (open.empty()) {
      ++t.top_level_calls;
      ++top_level;
      top_level_ns += duration;
    } else {
      callee_ns[open.back()] += duration;
    }
    open.push_back(i);
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const double duration = static_cast<double>(spans[i].end_ns - spans[i].start_ns);
    totals[spans[i].name].self_ns += std::max(0.0, duration - callee_ns[i]);
  }
  HostOpSummary summary;
  summary.ops = per_run(totals, runs, /*by_self=*/true);
  summary.calls = static_cast<double>(spans.size()) / runs;
  summary.top_level_calls = static_cast<double>(top_level) / runs;
  summary.top_level_us = top_level_ns / 1e3 / runs;
  return summary;
}

RunProfile profile_runs(const std::function<void()>& run, int runs, const c10::Device& device,
                        const std::string& trace_path) {
  if (runs < 1) throw UsageError(str("--profile-runs: expected at least 1, got ", runs));
  std::set<profiler_impl::ActivityType> activities = {profiler_impl::ActivityType::CPU};
  if (device.is_cuda()) activities.insert(profiler_impl::ActivityType::CUDA);
  // Kineto logs every start and stop on stderr ("USDT: ... profiler_start"): quiet unless the user asks.
  setenv("KINETO_LOG_LEVEL", "6", /*overwrite=*/0);
  const profiler_impl::ProfilerConfig config(profiler_impl::ProfilerState::KINETO);
  kineto_profiler::prepareProfiler(config, activities);
  kineto_profiler::enableProfiler(config, activities);
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < runs; ++i) run();
    if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : 0);
  } catch (...) {
    kineto_profiler::disableProfiler();
    stop_kineto_config_thread();
    throw;
  }
  const double wall_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::unique_ptr<kineto_profiler::ProfilerResult> result = kineto_profiler::disableProfiler();
  stop_kineto_config_thread();

  RunProfile profile;
  profile.runs = runs;
  profile.cuda = device.is_cuda();
  profile.wall_us = wall_us / runs;
  std::vector<HostOpSpan> host;
  std::map<std::string, Totals> device_totals;
  int64_t kernels = 0, runtime_launches = 0, driver_launches = 0;
  double device_ns = 0, launch_ns = 0;
  for (const auto& event : result->events()) {
    const uint8_t type = event.activityType();
    const double duration = static_cast<double>(event.durationNs());
    if (is_host_op(type)) {
      host.push_back({event.startThreadId(), event.startNs(), event.startNs() + event.durationNs(), event.name()});
    } else if (is_device_work(type)) {
      Totals& t = device_totals[event.name()];
      ++t.calls;
      t.total_ns += duration;
      t.self_ns += duration;
      device_ns += duration;
      if (type == static_cast<uint8_t>(ActivityType::CONCURRENT_KERNEL)) ++kernels;
    } else if (event.name().find("Launch") != std::string::npos) {
      if (type == static_cast<uint8_t>(ActivityType::CUDA_RUNTIME)) {
        ++runtime_launches;
        launch_ns += duration;
      } else if (type == static_cast<uint8_t>(ActivityType::CUDA_DRIVER)) {
        ++driver_launches;
      }
    }
  }
  HostOpSummary host_summary = summarize_host_ops(std::move(host), runs);
  profile.host_ops = std::move(host_summary.ops);
  profile.host_calls = host_summary.calls;
  profile.host_top_level_calls = host_summary.top_level_calls;
  profile.host_top_level_us = host_summary.top_level_us;
  profile.device_work = per_run(device_totals, runs, /*by_self=*/false);
  profile.device_busy_us = device_ns / 1e3 / runs;
  profile.kernels = static_cast<double>(kernels) / runs;
  profile.runtime_launches = static_cast<double>(runtime_launches) / runs;
  profile.driver_launches = static_cast<double>(driver_launches) / runs;
  profile.launch_api_us = launch_ns / 1e3 / runs;
  if (!trace_path.empty()) {
    // Beside the target under AtomicOutput's temporary name (lib/core/files.h), renamed into place when whole.
    const std::filesystem::path target(trace_path);
    const std::string temporary = str(target.parent_path().string(), target.has_parent_path() ? "/." : ".",
                                      target.filename().string(), ".tmp.", getpid());
    std::error_code error;
    try {
      result->save(temporary);
    } catch (...) {
      std::filesystem::remove(temporary, error);
      throw;
    }
    std::filesystem::rename(temporary, trace_path, error);
    if (error) {
      std::filesystem::remove(temporary, error);
      throw Error(str(trace_path, ": cannot write the profiler's trace: ", error.message()));
    }
  }
  return profile;
}

std::string profile_markdown(const RunProfile& p, const std::string& title, size_t max_rows) {
  std::ostringstream out;
  out << "# Profile: " << title << "\n\n"
      << p.runs << " run" << (p.runs == 1 ? "" : "s")
      << " under PyTorch's profiler (Kineto), after the timed runs; every figure is per run, and the profiler's own "
         "overhead is in the wall time.\n\n"
      << "- wall: " << number(p.wall_us / 1e3, 3) << " ms\n"
      << "- host: " << calls_text(p.host_top_level_calls) << " top-level op calls taking "
      << number(p.host_top_level_us / 1e3, 3) << " ms (summed over threads; " << calls_text(p.host_calls)
      << " ops in all, autograd's nodes included)\n";
  if (p.cuda && p.device_work.empty()) {
    out << "- device: no device activity was recorded (CUPTI unavailable to Kineto? Run again with "
           "KINETO_LOG_LEVEL=0 to see its messages)\n";
  }
  if (!p.device_work.empty() || p.runtime_launches > 0 || p.driver_launches > 0) {
    out << "- device: busy " << number(p.device_busy_us / 1e3, 3) << " ms (kernels, memcpy and memset summed) in "
        << calls_text(p.kernels) << " kernels; launch calls on the host: " << calls_text(p.runtime_launches)
        << " to the runtime taking " << number(p.launch_api_us / 1e3, 3) << " ms, " << calls_text(p.driver_launches)
        << " to the driver\n";
  }
  if (!p.device_work.empty()) {
    out << "\n## Device work, by time\n\n| kernel | calls | total us | mean us | share of busy |\n"
        << "|---|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < std::min(max_rows, p.device_work.size()); ++i) {
      const ProfiledName& row = p.device_work[i];
      out << "| " << cell(row.name) << " | " << calls_text(row.calls) << " | " << number(row.total_us, 1) << " | "
          << number(row.total_us / row.calls, 2) << " | "
          << number(p.device_busy_us > 0 ? 100 * row.total_us / p.device_busy_us : 0, 1) << "% |\n";
    }
    if (p.device_work.size() > max_rows) out << "\n(" << p.device_work.size() - max_rows << " more names)\n";
  }
  out << "\n## Host ops, by self time\n\n| op | calls | top-level calls | self us | with callees us |\n"
      << "|---|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < std::min(max_rows, p.host_ops.size()); ++i) {
    const ProfiledName& row = p.host_ops[i];
    out << "| " << cell(row.name) << " | " << calls_text(row.calls) << " | " << calls_text(row.top_level_calls) << " | "
        << number(row.self_us, 1) << " | " << number(row.total_us, 1) << " |\n";
  }
  if (p.host_ops.size() > max_rows) out << "\n(" << p.host_ops.size() - max_rows << " more names)\n";
  return out.str();
}

std::string write_profile(const std::string& dir, const std::string& stem, const std::string& title,
                          const std::function<void()>& run, int runs, const c10::Device& device) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw Error(str(dir, ": cannot create the --profile directory: ", error.message()));
  const std::string base = (std::filesystem::path(dir) / stem).string();
  const RunProfile profile = profile_runs(run, runs, device, base + ".trace.json");
  write_file_atomically(base + ".md", profile_markdown(profile, title));
  return base + ".md";
}

void profile_if_asked(const ProfileRequest& request, const std::string& stem, const std::string& title,
                      const std::function<void()>& run, const c10::Device& device) {
  if (request.dir.empty()) return;
  log_info("bench: profile -> ", write_profile(request.dir, profile_stem(stem), title, run, request.runs, device));
}

std::string profile_stem(const std::string& text) {
  std::string stem = text;
  for (char& c : stem) {
    const bool kept =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!kept) c = '_';
  }
  return stem;
}

}  // namespace cabert::bench
