// Errors that cross the library boundary. cmd/main.cc is the one place that turns them into exit codes
// (documented in README.md): usage errors 2, bad input data 3, interruption 128+signal, anything else 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cabert {

enum class ExitCode : int { kOk = 0, kRuntime = 1, kUsage = 2, kBadInput = 3 };

// Concatenates any streamable values: str("expected ", n, " fields, got ", m).
template <typename... Parts>
std::string str(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

// "a, b, c": a list of names (labels, options) inside a message.
std::string joined(const std::vector<std::string>& items);

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int exit_code = static_cast<int>(ExitCode::kRuntime))
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// The command line asks for something impossible (unknown preset, conflicting flags, a subcommand that a
// later version provides).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, static_cast<int>(ExitCode::kUsage)) {}
};

// The input data is malformed. The message names the file and the line or byte offset.
class DataError : public Error {
 public:
  explicit DataError(const std::string& message) : Error(message, static_cast<int>(ExitCode::kBadInput)) {}
};

// SIGINT/SIGTERM arrived; whatever could be saved was saved. Exit code 128 + signal.
class Interrupted : public Error {
 public:
  explicit Interrupted(int signal_number)
      : Error(str("interrupted by signal ", signal_number), 128 + signal_number), signal_(signal_number) {}
  int signal_number() const { return signal_; }

 private:
  int signal_;
};

// "file:line: message" or "file: message" when the line is unknown (0).
std::string at_line(const std::string& file, uint64_t line, const std::string& message);
// "file: at byte offset N: message".
std::string at_offset(const std::string& file, uint64_t offset, const std::string& message);

}  // namespace cabert
