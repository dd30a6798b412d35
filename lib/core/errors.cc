#include "lib/core/errors.h"

namespace cabert {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string at_line(const std::string& file, uint64_t line, const std::string& message) {
  if (line == 0) return str(file, ": ", message);
  return str(file, ":", line, ": ", message);
}

std::string at_offset(const std::string& file, uint64_t offset, const std::string& message) {
  return str(file, ": at byte offset ", offset, ": ", message);
}

}  // namespace cabert
