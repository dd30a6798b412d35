#include "lib/core/log.h"

#include <atomic>
#include <iostream>
#include <mutex>

namespace cabert {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_quiet{false};
std::mutex g_mutex;
std::string& source() {
  static std::string value = "cabert";
  return value;
}
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_quiet(bool quiet) { g_quiet = quiet; }
bool quiet() { return g_quiet; }

void set_log_source(const std::string& value) { source() = value; }
const std::string& log_source() { return source(); }

LogLevel parse_log_level(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  throw UsageError(str("--log-level: expected error, warning, info or debug, got '", name, "'"));
}

void log_message(LogLevel level, const std::string& message) {
  static const char* const kNames[] = {"error", "warning", "info", "debug"};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::cerr << source() << ": " << (level == LogLevel::kInfo ? "" : std::string(kNames[static_cast<int>(level)]) + ": ")
            << message << std::endl;
}

}  // namespace cabert
