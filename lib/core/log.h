// Diagnostics on stderr; data goes to stdout. Levels: error < warning < info < debug.
#pragma once

#include <string>

#include "lib/core/errors.h"

namespace cabert {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Parses "error", "warning", "info", "debug"; throws UsageError otherwise.
LogLevel parse_log_level(const std::string& name);
// --quiet: no progress lines and no info messages.
void set_quiet(bool quiet);
bool quiet();

// What messages start with: "cabert", or "cabert[rank 1]" in a data-parallel job.
void set_log_source(const std::string& source);
const std::string& log_source();

// --log-format: text (the default: human lines; progress redrawn in place on a terminal) or json (one object
// per line on stderr: time, level, source, subcommand, message, and for progress lines their fields).
enum class LogFormat { kText, kJson };
LogFormat parse_log_format(const std::string& name);  // "text" or "json"; UsageError otherwise
void set_log_format(LogFormat format);
LogFormat log_format();
// --log-file: every message and progress line also goes to `path`, appended (a resumed run continues its log),
// in the --log-format, text lines prefixed with a UTC timestamp. UsageError when it cannot be opened.
void set_log_file(const std::string& path);
// The subcommand JSON lines name ("pretrain", "tokenize train").
void set_log_subcommand(const std::string& name);

// Whether --log-file is open: -q silences stderr, not the log file, which still gets every message.
bool logging_to_file();

void log_message(LogLevel level, const std::string& message, bool to_stderr = true);

// One progress line of lib/core/progress.h, with its fields for JSON.
struct ProgressLine {
  std::string label, unit, extra;  // extra: "loss 2.31, lr 0.001, ..." ("name number" pairs become fields)
  uint64_t done = 0, total = 0;    // total 0: unknown
  double rate = 0, elapsed_seconds = 0, eta_seconds = -1;  // eta < 0: unknown
  bool final_line = false;
};
// Writes `text` (the human line, without the source prefix) or the JSON object to stderr unless -q silenced it
// (`to_stderr` false), redrawing in place when `redraw` (a terminal in text mode), and to the log file when
// `to_file`.
void log_progress(const ProgressLine& line, const std::string& text, bool redraw, bool to_file, bool to_stderr = true);

template <typename... Parts>
void log_info(Parts&&... parts) {
  if (log_level() >= LogLevel::kInfo && (!quiet() || logging_to_file())) {
    log_message(LogLevel::kInfo, str(std::forward<Parts>(parts)...), /*to_stderr=*/!quiet());
  }
}
template <typename... Parts>
void log_warning(Parts&&... parts) {
  if (log_level() >= LogLevel::kWarning) log_message(LogLevel::kWarning, str(std::forward<Parts>(parts)...));
}
template <typename... Parts>
void log_debug(Parts&&... parts) {
  if (log_level() >= LogLevel::kDebug) log_message(LogLevel::kDebug, str(std::forward<Parts>(parts)...));
}

}  // namespace cabert
