#include "lib/core/numbers.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lib/core/errors.h"

namespace cabert {

int64_t parse_integer(const std::string& text, int64_t min, int64_t max, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  const bool whole =
      !text.empty() && end == text.c_str() + text.size() && text.find_first_of(" \t\n") == std::string::npos;
  if (!whole || errno == ERANGE || value < min || value > max) {
    throw DataError(str(where, ": expected an integer in [", min, ", ", max, "], got '", text, "'"));
  }
  return value;
}

double parse_finite(const std::string& text, const std::string& where) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  const bool whole =
      !text.empty() && end == text.c_str() + text.size() && text.find_first_of(" \t\n") == std::string::npos;
  if (!whole || !std::isfinite(value)) {
    throw DataError(str(where, ": expected a finite number, got '", text, "'"));
  }
  return value;
}

std::string exact_number(double value) {
  char buffer[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

}  // namespace cabert
