#include "lib/core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "lib/core/interrupt.h"

namespace cabert {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_quiet{false};
std::atomic<bool> g_to_file{false};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_mutex;
std::string& source() {
  static std::string value = "cabert";
  return value;
}
std::string& subcommand() {
  static std::string value;
  return value;
}
std::ofstream& log_file() {
  static std::ofstream file;
  return file;
}

const char* level_name(LogLevel level) {
  static const char* const kNames[] = {"error", "warning", "info", "debug"};
  return kNames[static_cast<int>(level)];
}

// UTC, ISO 8601 with milliseconds: 2026-11-25T05:50:01.123Z.
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[80];  // 24 bytes in practice; room for what -Wformat-truncation counts (any int in each field)
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return text;
}

nlohmann::json json_header(const std::string& time, const char* level) {
  nlohmann::json object;
  object["time"] = time;
  object["level"] = level;
  object["source"] = source();
  if (!subcommand().empty()) object["subcommand"] = subcommand();
  return object;
}

std::string dump(const nlohmann::json& object) {
  return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Writes one line to the log file (caller holds g_mutex).
void to_file(const std::string& time, const std::string& text_line, const std::string& json_line) {
  std::ofstream& file = log_file();
  if (!file.is_open()) return;
  if (log_format() == LogFormat::kJson) {
    file << json_line << '\n';
  } else {
    file << time << ' ' << text_line << '\n';
  }
  file.flush();
}

// The signal handler's JSON line carries what every line does (lib/core/interrupt.h).
void refresh_signal_notice() {
  if (log_format() != LogFormat::kJson) {
    set_signal_notice_json("");
    return;
  }
  nlohmann::json object = json_header("", "warning");
  object.erase("time");
  object["message"] = kSignalNotice;
  std::string line = dump(object);  // keys in order: "time", the last of every line, is added by the handler
  line.pop_back();
  set_signal_notice_json(line + ",\"time\":\"");
}

}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_quiet(bool quiet) { g_quiet = quiet; }
bool quiet() { return g_quiet; }

void set_log_source(const std::string& value) {
  source() = value;
  refresh_signal_notice();
}
const std::string& log_source() { return source(); }

LogLevel parse_log_level(const std::string& name) {
  if (name == "error") return LogLevel::kError;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "info") return LogLevel::kInfo;
  if (name == "debug") return LogLevel::kDebug;
  throw UsageError(str("--log-level: expected error, warning, info or debug, got '", name, "'"));
}

LogFormat parse_log_format(const std::string& name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  throw UsageError(str("--log-format: expected text or json, got '", name, "'"));
}
void set_log_format(LogFormat format) {
  g_format = static_cast<int>(format);
  refresh_signal_notice();
}
LogFormat log_format() { return static_cast<LogFormat>(g_format.load()); }

void set_log_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::ofstream& file = log_file();
  if (file.is_open()) file.close();
  g_to_file = false;
  if (path.empty()) return;
  file.open(path, std::ios::app);
  if (!file) throw UsageError(str("--log-file: cannot open ", path, " for appending"));
  g_to_file = true;
}

bool logging_to_file() { return g_to_file; }

void set_log_subcommand(const std::string& name) {
  subcommand() = name;
  refresh_signal_notice();
}

void log_message(LogLevel level, const std::string& message, bool to_stderr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string time = timestamp();
  const std::string text = str(source(), ": ", level == LogLevel::kInfo ? "" : str(level_name(level), ": "), message);
  nlohmann::json object = json_header(time, level_name(level));
  object["message"] = message;
  const std::string json_line = dump(object);
  if (to_stderr) std::cerr << (log_format() == LogFormat::kJson ? json_line : text) << std::endl;
  to_file(time, text, json_line);
}

void log_progress(const ProgressLine& line, const std::string& text, bool redraw, bool file, bool to_stderr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string time = timestamp();
  const std::string text_line = str(source(), ": ", text);
  nlohmann::json object = json_header(time, "progress");
  object["label"] = line.label;
  object["unit"] = line.unit;
  object["done"] = line.done;
  if (line.total > 0) object["total"] = line.total;
  object["rate"] = line.rate;
  object["elapsed_seconds"] = line.elapsed_seconds;
  if (line.eta_seconds >= 0) object["eta_seconds"] = line.eta_seconds;
  object["final"] = line.final_line;
  // "loss 2.31, lr 0.001, 12.3 k tok/s": the "name number" parts become fields, the rest stays text.
  static const std::regex pair(R"(^([A-Za-z_][A-Za-z_0-9]*) (-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)$)");
  std::string rest;
  size_t begin = 0;
  while (begin < line.extra.size()) {
    size_t end = line.extra.find(", ", begin);
    if (end == std::string::npos) end = line.extra.size();
    const std::string part = line.extra.substr(begin, end - begin);
    std::smatch match;
    if (std::regex_match(part, match, pair) && !object.contains(match[1].str())) {
      object[match[1].str()] = std::stod(match[2].str());
    } else if (!part.empty()) {
      rest += (rest.empty() ? "" : ", ") + part;
    }
    begin = end + 2;
  }
  if (!rest.empty()) object["extra"] = rest;
  object["message"] = text;
  const std::string json_line = dump(object);
  if (!to_stderr) {
    // -q: the log file only
  } else if (log_format() == LogFormat::kJson) {
    std::cerr << json_line << std::endl;
  } else if (redraw) {
    std::cerr << "\r\033[K" << text_line << (line.final_line ? "\n" : "") << std::flush;
  } else {
    std::cerr << text_line << std::endl;
  }
  if (file) to_file(time, text_line, json_line);
}

}  // namespace cabert
