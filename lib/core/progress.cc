#include "lib/core/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "lib/core/log.h"

namespace cabert {

std::string human_count(double value) {
  const char* suffix[] = {"", " k", " M", " G", " T"};
  int index = 0;
  while (std::fabs(value) >= 1000.0 && index < 4) {
    value /= 1000.0;
    ++index;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), index == 0 ? "%.0f%s" : "%.3g%s", value, suffix[index]);
  return buffer;
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto total = static_cast<long>(seconds + 0.5);
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%ldh%02ldm", total / 3600, (total / 60) % 60);
  } else if (total >= 60) {
    std::snprintf(buffer, sizeof(buffer), "%ldm%02lds", total / 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%lds", total);
  }
  return buffer;
}

Progress::Progress(std::string label, std::string unit, uint64_t total)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_),
      last_file_line_(start_),
      tty_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() {
  if (printed_ && !finished_ && redraws() && !quiet()) std::cerr << std::endl;
}

bool Progress::redraws() const { return tty_ && log_format() == LogFormat::kText; }

void Progress::update(uint64_t done, const std::string& extra) {
  done_ = done;
  if (quiet() && !logging_to_file()) return;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_print_).count();
  if (since < (redraws() && !quiet() ? 0.5 : 10.0)) return;
  last_print_ = now;
  print(false, extra);
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  if (!quiet() || logging_to_file()) print(true, extra);
}

void Progress::print(bool final_line, const std::string& extra) {
  const auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  ProgressLine fields;
  fields.label = label_;
  fields.unit = unit_;
  fields.extra = extra;
  fields.done = done_;
  fields.total = total_;
  fields.rate = rate;
  fields.elapsed_seconds = elapsed;
  fields.final_line = final_line;
  std::string line = str(label_, ": ", human_count(static_cast<double>(done_)), " ", unit_);
  if (total_ > 0 && !final_line) {
    line += str(" / ", human_count(static_cast<double>(total_)), " (",
                static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_)), "%)");
  }
  line += str(", ", human_count(rate), " ", unit_, "/s");
  if (total_ > 0 && !final_line && rate > 0 && done_ <= total_) {
    fields.eta_seconds = static_cast<double>(total_ - done_) / rate;
    line += str(", ETA ", human_duration(fields.eta_seconds));
  }
  if (final_line) line += str(", ", human_duration(elapsed));
  if (!extra.empty()) line += ", " + extra;
  printed_ = true;
  // The log file gets a line every 10 s and the last one, whatever the terminal's redraw rate.
  const bool to_file = final_line || std::chrono::duration<double>(now - last_file_line_).count() >= 10.0;
  if (to_file) last_file_line_ = now;
  log_progress(fields, line, redraws(), to_file, /*to_stderr=*/!quiet());
}

}  // namespace cabert
