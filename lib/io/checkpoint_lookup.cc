#include "lib/io/checkpoint_lookup.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <regex>
#include <sstream>

#include "lib/core/errors.h"
#include "lib/core/log.h"
#include "lib/io/checkpoint_file.h"

namespace cabert::io {

std::string checkpoint_path(const std::string& dir, int64_t step) {
  std::ostringstream name;
  name << "checkpoint-" << std::setw(8) << std::setfill('0') << step << ".cabert";
  return (std::filesystem::path(dir) / name.str()).string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!std::filesystem::is_directory(dir)) return found;
  static const std::regex pattern("checkpoint-([0-9]+)\\.cabert");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, pattern)) found.emplace_back(std::stoll(match[1]), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string resolve_checkpoint_argument(const std::string& path, const std::string& flag) {
  if (path.empty() || !std::filesystem::is_directory(path)) return path;
  const std::string best = (std::filesystem::path(path) / "best.cabert").string();
  if (std::filesystem::is_regular_file(best)) {
    log_info(flag, " ", path, ": using ", best);
    return best;
  }
  const auto checkpoints = list_checkpoints(path);
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    try {
      read_checkpoint_info(it->second);
    } catch (const Error& error) {
      log_warning(flag, " ", path, ": skipping ", it->second, ", which does not read back: ", error.what());
      continue;
    }
    log_info(flag, " ", path, ": using ", it->second);
    return it->second;
  }
  throw UsageError(
      str(flag, ": ", path, " is a directory with neither best.cabert nor a readable checkpoint-<step>.cabert"));
}

}  // namespace cabert::io
