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
    : label_(std::move(label)), unit_(std::move(unit)), total_(total),
      start_(std::chrono::steady_clock::now()), last_print_(start_), tty_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() {
  if (printed_ && !finished_ && tty_ && !quiet()) std::cerr << std::endl;
}

void Progress::update(uint64_t done, const std::string& extra) {
  done_ = done;
  if (quiet()) return;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_print_).count();
  if (since < (tty_ ? 0.5 : 10.0)) return;
  last_print_ = now;
  print(false, extra);
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  if (!quiet()) print(true, extra);
}

void Progress::print(bool final_line, const std::string& extra) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  std::string line = str(log_source(), ": ", label_, ": ", human_count(static_cast<double>(done_)), " ", unit_);
  if (total_ > 0 && !final_line) {
    line += str(" / ", human_count(static_cast<double>(total_)), " (",
                static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_)), "%)");
  }
  line += str(", ", human_count(rate), " ", unit_, "/s");
  if (total_ > 0 && !final_line && rate > 0 && done_ <= total_) {
    line += str(", ETA ", human_duration(static_cast<double>(total_ - done_) / rate));
  }
  if (final_line) line += str(", ", human_duration(elapsed));
  if (!extra.empty()) line += ", " + extra;
  printed_ = true;
  if (tty_) {
    std::cerr << "\r\033[K" << line << (final_line ? "\n" : "") << std::flush;
  } else {
    std::cerr << line << std::endl;
  }
}

}  // namespace cabert
