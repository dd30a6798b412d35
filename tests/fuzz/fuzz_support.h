// Shared by the libFuzzer targets (tests/fuzz/*_fuzz.cc; scripts/fuzz.sh builds and runs them).
//
// A target feeds one input to one of cabert's readers. Refusing the input is fine, in the way the README
// promises for bad input data: a cabert::DataError (exit code 3) for a data reader, a cabert::UsageError
// (exit code 2) for a config the user gave. Everything else is a finding: a crash or sanitizer report, any
// other exception escaping (libFuzzer reports the abort of std::terminate), an allocation over
// -malloc_limit_mb, a run over -timeout.
#pragma once

#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/core/errors.h"
#include "lib/core/log.h"

namespace cabert::fuzz {

// Readers warn about skipped rows, and protobuf logs every string field that is not UTF-8; a fuzzing run
// would print that for every input.
inline const bool kQuietLogs = (set_log_level(LogLevel::kError), google::protobuf::SetLogHandler(nullptr), true);

// Runs `read`; returns normally when it succeeds or refuses the input with `Expected` (or `AlsoExpected`).
// Any other cabert::Error is a finding too (for a data reader: the wrong exit code for bad data): printed,
// then abort.
template <typename Expected, typename AlsoExpected = Expected, typename Read>
void expect_only(const char* what, Read&& read) {
  try {
    read();
  } catch (const Expected&) {
  } catch (const AlsoExpected&) {
  } catch (const Error& error) {
    std::fprintf(stderr, "%s: unexpected cabert::Error (exit code %d, expected %d): %s\n", what, error.exit_code(),
                 Expected("").exit_code(), error.what());
    std::abort();
  }
}

// The readers take paths: each input is written to one file per process and suffix, rewritten per run
// (in /dev/shm when it exists, so that a run costs no disk I/O).
inline const std::string& input_file(const uint8_t* data, size_t size, const std::string& suffix) {
  static const std::string directory = [] {
    const char* tmp = std::getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0) return std::string("/dev/shm");
    return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  }();
  static std::string path;
  static bool cleanup = std::atexit([] { std::remove(path.c_str()); }) == 0;
  (void)cleanup;
  path = directory + "/cabert-fuzz-" + std::to_string(getpid()) + suffix;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::abort();
  }
  size_t written = 0;
  while (written < size) {
    ssize_t n = ::write(fd, data + written, size - written);
    if (n <= 0) {
      std::perror(path.c_str());
      std::abort();
    }
    written += static_cast<size_t>(n);
  }
  ::close(fd);
  return path;
}

}  // namespace cabert::fuzz
