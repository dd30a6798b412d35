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

void log_message(LogLevel level, const std::string& message);

template <typename... Parts>
void log_info(Parts&&... parts) {
  if (log_level() >= LogLevel::kInfo && !quiet()) log_message(LogLevel::kInfo, str(std::forward<Parts>(parts)...));
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
