// Progress lines on stderr for long jobs: count, rate and ETA. On a terminal the line is redrawn at most
// every 0.5 s; otherwise (logs, CI, --log-format json) one line every 10 s; a --log-file gets one every 10 s.
// Silent with --quiet.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cabert {

class Progress {
 public:
  // `total` is in the same unit as the values passed to update(); 0 = unknown (no ETA).
  Progress(std::string label, std::string unit, uint64_t total = 0);
  ~Progress();
  void update(uint64_t done, const std::string& extra = "");
  // Prints the final line (always, unless quiet).
  void finish(const std::string& extra = "");

 private:
  void print(bool final_line, const std::string& extra);
  bool redraws() const;  // a terminal in text mode: the line is redrawn in place

  std::string label_, unit_;
  uint64_t total_, done_ = 0;
  std::chrono::steady_clock::time_point start_, last_print_, last_file_line_;
  bool tty_, finished_ = false, printed_ = false;
};

// "12.3 k", "4.56 M" ...
std::string human_count(double value);
// "1h02m", "3m05s", "12s".
std::string human_duration(double seconds);

}  // namespace cabert
